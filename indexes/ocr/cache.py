"""Lines read per image, kept across runs: an interrupted OCR pass resumes where it stopped.

Entries are keyed by the XXH3-128 digest of the image bytes, not by id or path, so a rerun
(after a crash, a Ctrl-C, or on another corpus holding the same photos) skips every image read
before, and a changed image is read again. The file is append-only JSON Lines, flushed after
each image: a header naming the reader (package version, model digests), then one line per
image with all its raw lines (unfiltered, so any confidence threshold can be applied later).
A cache made by other models is refused rather than mixed in.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

from mmrag.indexes.errors import InputError
from mmrag.indexes.journal import whole_lines
from mmrag.indexes.sources import OcrLine

FORMAT = "mmrag ocr cache"
VERSION = 1


class OcrCache:
    """`get(digest)` and `add(digest, lines)`; with no path, a cache for this process only."""

    def __init__(self, path: Path | None, reader: dict[str, str]) -> None:
        self.path = path
        self.reader = reader
        self._memory: dict[str, list[OcrLine]] = {}
        self._offsets: dict[str, int] = {}
        self._append: IO[bytes] | None = None
        self._read: IO[bytes] | None = None
        if path is not None and path.exists():
            self._index(path)

    def _index(self, path: Path) -> None:
        offset = 0
        for number, line in enumerate(whole_lines(path), start=1):
            try:
                entry = json.loads(line)
            except ValueError:
                raise InputError(f"{path}: line {number} is not JSON; delete the cache") from None
            if number == 1:
                self._check_header(path, entry)
            elif isinstance(entry, dict) and isinstance(entry.get("digest"), str):
                self._offsets[entry["digest"]] = offset
            offset += len(line) + 1

    def _check_header(self, path: Path, header: Any) -> None:
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise InputError(f"{path}: not an mmrag OCR cache; delete it or choose another")
        if header.get("version") != VERSION or header.get("reader") != self.reader:
            raise InputError(
                f"{path}: OCR cache of other models or another mmrag version "
                f"({header.get('reader')}); delete it or choose another cache file"
            )

    def __len__(self) -> int:
        return len(self._offsets) + len(self._memory)

    def get(self, digest: str) -> list[OcrLine] | None:
        if digest in self._memory:
            return self._memory[digest]
        offset = self._offsets.get(digest)
        if offset is None or self.path is None:
            return None
        if self._read is None:
            self._read = self.path.open("rb")
        self._read.seek(offset)
        entry = json.loads(self._read.readline())
        return [OcrLine.from_dict(line) for line in entry["lines"]]

    def add(self, digest: str, lines: list[OcrLine]) -> None:
        """Record an image's lines; on disk before the next image is read."""
        if self.path is None:
            self._memory[digest] = lines
            return
        if self._append is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            new = not self.path.exists() or self.path.stat().st_size == 0
            self._append = self.path.open("ab")
            if new:
                self._write({"format": FORMAT, "version": VERSION, "reader": self.reader})
        offset = self._append.tell()
        self._write({"digest": digest, "lines": [line.to_dict() for line in lines]})
        self._offsets[digest] = offset

    def _write(self, value: dict[str, Any]) -> None:
        assert self._append is not None
        self._append.write(json.dumps(value, ensure_ascii=False).encode() + b"\n")
        self._append.flush()

    def close(self) -> None:
        for handle in (self._append, self._read):
            if handle is not None:
                handle.close()
        self._append = self._read = None
