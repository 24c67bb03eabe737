"""Append-only JSON Lines files that survive a crash: only whole lines are ever read back.

A process killed mid-write leaves a torn last line. Readers cut it off (and truncate the file
there, so later appends continue after the last whole record) instead of refusing the file:
everything before it was flushed whole and is still good. OCR caches and `eval run` checkpoints
are both written this way.
"""

from __future__ import annotations

import os
from pathlib import Path


def whole_lines(path: Path) -> list[bytes]:
    """The file's complete lines (without their newlines), after cutting a torn last line."""
    raw = path.read_bytes()
    whole = raw[: raw.rfind(b"\n") + 1]
    if len(whole) != len(raw):
        with path.open("r+b") as handle:
            handle.truncate(len(whole))
            os.fsync(handle.fileno())
    return whole.split(b"\n")[:-1]  # bytes.splitlines would also split at a \r
