"""One request's time budget and its cancellation, shared by every stage that works for it.

Upload OCR, retrieval, generation and verification each ask `why_stop()` between units of their
work (a slice of OCR lines, a token, a chunk of llama.cpp's prompt), so a request past its
deadline, or whose client has gone, stops wherever it is instead of finishing unseen work
while the next client waits.
"""

from __future__ import annotations

import threading
import time


class Deadline:
    """`timeout_s` from now (None: never), or earlier by `cancel()` from any thread."""

    def __init__(self, timeout_s: float | None) -> None:
        self.timeout_s = timeout_s
        self.at = None if timeout_s is None else time.monotonic() + timeout_s
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        """Stop the request's work at its next check; never blocks, so an event loop may call
        it, any number of times."""
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def timed_out(self) -> str:
        return f"timed out after {self.timeout_s:g} s"

    def why_stop(self) -> str | None:
        """Why the work must stop now, if it must."""
        if self._cancelled.is_set():
            return "the request was cancelled"
        if self.at is not None and time.monotonic() > self.at:
            return self.timed_out()
        return None

    def stopped(self) -> bool:
        return self.why_stop() is not None
