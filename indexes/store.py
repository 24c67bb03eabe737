"""Sources on disk, memory-mapped: a ranked list needs only its top-k records, never all 930K.

Layout under `sources/`: `sources.jsonl` (one record per row), `offsets.npy` (row start bytes,
n+1 entries), `modality.npy` (uint8 code per row) and an id lookup (`id_hash.npy` sorted 64-bit
hashes with `id_rows.npy`), so `find(id)` is a binary search plus one record read. An index
built with OCR adds `ocr.jsonl` and `ocr_offsets.npy` (n+1 entries; an empty slice for a row
with no text read): the lines of scene text of each image, written after the corpus pass.
"""

from __future__ import annotations

import hashlib
import json
import mmap
from pathlib import Path

import numpy as np

from mmrag.indexes.sources import MODALITIES, Modality, OcrLine, Source

STORE_DIR = "sources"
OCR_RECORDS = "ocr.jsonl"
OCR_OFFSETS = "ocr_offsets.npy"
MODALITY_CODES: dict[Modality, int] = {name: code for code, name in enumerate(MODALITIES)}


def id_hash(source_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(source_id.encode(), digest_size=8).digest(), "little")


_ENCODER = json.JSONEncoder(ensure_ascii=False)  # built once: `json.dumps` builds one a call


class SourceStoreWriter:
    """Appends sources in row order; `close()` writes the arrays that make rows addressable."""

    def __init__(self, root: Path) -> None:
        self.folder = root / STORE_DIR
        self.folder.mkdir(parents=True, exist_ok=True)
        self._records = (self.folder / "sources.jsonl").open("wb")
        self._offsets: list[int] = [0]
        self._modalities: list[int] = []
        self._hashes: list[int] = []

    def add(self, source: Source) -> int:
        line = _ENCODER.encode(source.to_dict()).encode() + b"\n"
        self._records.write(line)
        self._offsets.append(self._offsets[-1] + len(line))
        self._modalities.append(MODALITY_CODES[source.modality])
        self._hashes.append(id_hash(source.id))
        return len(self._modalities) - 1

    def close(self) -> None:
        self._records.close()
        np.save(self.folder / "offsets.npy", np.asarray(self._offsets, dtype=np.uint64))
        np.save(self.folder / "modality.npy", np.asarray(self._modalities, dtype=np.uint8))
        hashes = np.asarray(self._hashes, dtype=np.uint64)
        order = np.argsort(hashes, kind="stable")
        np.save(self.folder / "id_hash.npy", hashes[order])
        np.save(self.folder / "id_rows.npy", order.astype(np.int64))


class OcrLinesWriter:
    """The OCR lines of rows given in increasing order; rows never given have none."""

    def __init__(self, root: Path, rows: int) -> None:
        self.folder = root / STORE_DIR
        self.rows = rows
        self._records = (self.folder / OCR_RECORDS).open("wb")
        self._ends = np.zeros(rows, dtype=np.uint64)  # end byte of each row's slice
        self._written = 0
        self._next_row = 0

    def add(self, row: int, lines: list[OcrLine]) -> None:
        if row < self._next_row:
            raise ValueError("OCR lines must be added in increasing row order")
        self._ends[self._next_row : row] = self._written
        if lines:
            data = json.dumps([line.to_dict() for line in lines], ensure_ascii=False).encode()
            self._records.write(data + b"\n")
            self._written += len(data) + 1
        self._ends[row] = self._written
        self._next_row = row + 1

    def close(self) -> None:
        self._records.close()
        self._ends[self._next_row :] = self._written
        offsets = np.concatenate([np.zeros(1, np.uint64), self._ends])
        np.save(self.folder / OCR_OFFSETS, offsets)


def _map(path: Path, size: int) -> mmap.mmap | bytes:
    with path.open("rb") as handle:
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if size else b""


class SourceStore:
    def __init__(self, root: Path) -> None:
        folder = root / STORE_DIR
        self.offsets = np.load(folder / "offsets.npy", mmap_mode="r")
        self.modality_codes = np.load(folder / "modality.npy", mmap_mode="r")
        self._hashes = np.load(folder / "id_hash.npy", mmap_mode="r")
        self._hash_rows = np.load(folder / "id_rows.npy", mmap_mode="r")
        self._records = _map(folder / "sources.jsonl", int(self.offsets[-1]))
        self.ocr_offsets: np.ndarray | None = None
        self._ocr: mmap.mmap | bytes = b""
        if (folder / OCR_OFFSETS).is_file():
            self.ocr_offsets = np.load(folder / OCR_OFFSETS, mmap_mode="r")
            self._ocr = _map(folder / OCR_RECORDS, int(self.ocr_offsets[-1]))
        self.rows_by_modality: dict[Modality, np.ndarray] = {
            name: np.flatnonzero(np.asarray(self.modality_codes) == code)
            for name, code in MODALITY_CODES.items()
        }

    def __len__(self) -> int:
        return len(self.modality_codes)

    def rows_with_ocr(self) -> np.ndarray:
        """Rows that have OCR lines (images whose text was read and kept), in row order."""
        if self.ocr_offsets is None:
            return np.empty(0, dtype=np.int64)
        offsets = np.asarray(self.ocr_offsets)
        return np.flatnonzero(offsets[1:] > offsets[:-1])

    def get(self, row: int) -> Source:
        start, end = int(self.offsets[row]), int(self.offsets[row + 1])
        return Source.from_dict(json.loads(self._records[start:end]), self.ocr_lines(row))

    def ocr_lines(self, row: int) -> tuple[OcrLine, ...]:
        if self.ocr_offsets is None:
            return ()
        start, end = int(self.ocr_offsets[row]), int(self.ocr_offsets[row + 1])
        if start == end:
            return ()
        return tuple(OcrLine.from_dict(line) for line in json.loads(self._ocr[start:end]))

    def row_of(self, source_id: str) -> int | None:
        """The row of the source with this id, or None; hash collisions are resolved by id."""
        key = np.uint64(id_hash(source_id))
        position = int(np.searchsorted(self._hashes, key))
        while position < len(self._hashes) and self._hashes[position] == key:
            row = int(self._hash_rows[position])
            if self.get(row).id == source_id:
                return row
            position += 1
        return None

    def find(self, source_id: str) -> Source | None:
        row = self.row_of(source_id)
        return None if row is None else self.get(row)

    def __iter__(self):
        return (self.get(row) for row in range(len(self)))
