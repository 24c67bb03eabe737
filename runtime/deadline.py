"""One request's time budget and its cancellation, shared by every stage that works for it.

A request's work is many stages (reading an upload, resolving a follow-up, retrieval,
generation, verification, boxing), and each runs loops whose length its input sets: a
conversation's turns, a source's words, the ways a claim aligns with them. Each stage checks
the deadline between bounded steps of its work and stops there, so a request past its
deadline, or whose client has gone, stops wherever it is instead of finishing unseen work while
the next client waits.

Two ways to ask, one deadline:

- Handed down: `Deadline.why_stop()`/`stopped()` where a callable is wanted (an engine's
  `interrupt`, OCR's `stop`).
- Set for a block of work on the thread that does it, `with working(deadline):` (the pipeline's
  worker does), and named by stage, `with stage("verify"):`. Code deep inside a stage then calls
  `check()` between its steps, with no parameter threaded through: it raises `Stopped` (with
  the stage's name and the reason) once the deadline has passed, and does nothing where no
  deadline is set (a bench, a test, a command-line tool without one). A check costs a context
  variable's read and a clock read, about 0.1 us.

Context variables are per thread (a new thread starts with none), so a thread that works for a
request enters `working(deadline)` itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class Stopped(Exception):
    """The request's work stopped at a check: its deadline passed, or it was cancelled.
    `reason` says which ("timed out after 30 s"), `stage` where ("verify"; "" if unnamed)."""

    def __init__(self, reason: str, stage: str = "") -> None:
        super().__init__(f"{reason} (in {stage})" if stage else reason)
        self.reason = reason
        self.stage = stage


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

    def check(self, stage: str | None = None) -> None:
        """Raise `Stopped` if the work must stop, naming `stage` (default: the stage the
        calling thread is in, `stage()`)."""
        if (reason := self.why_stop()) is not None:
            raise Stopped(reason, current_stage() if stage is None else stage)


# The deadline the calling thread works under, and the stage it is in.
_WORK: ContextVar[tuple[Deadline | None, str]] = ContextVar("mmrag_work", default=(None, ""))


@contextmanager
def working(deadline: Deadline | None, stage_name: str = "") -> Iterator[None]:
    """Within the block, on this thread, `check()` checks `deadline` (None: nothing)."""
    token = _WORK.set((deadline, stage_name))
    try:
        yield
    finally:
        _WORK.reset(token)


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Within the block, this thread's work is the stage `name` ("resolve", "verify", ...),
    which `Stopped` reports."""
    token = _WORK.set((_WORK.get()[0], name))
    try:
        yield
    finally:
        _WORK.reset(token)


def current() -> Deadline | None:
    """The deadline this thread works under, if any."""
    return _WORK.get()[0]


def current_stage() -> str:
    return _WORK.get()[1]


def check() -> None:
    """Raise `Stopped` if the deadline this thread works under has passed or was cancelled;
    nothing where none is set. Call it between bounded steps of work."""
    deadline, name = _WORK.get()
    if deadline is not None and (reason := deadline.why_stop()) is not None:
        raise Stopped(reason, name)
