"""Plain JSONL corpora for users' own collections: one source per line.

Each line: {"id": str, "modality": "image"|"text", "title": str, "text": str, "url": str,
"image": path of the image file relative to the JSONL file (images only)}.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from mmrag.indexes.errors import CorpusError
from mmrag.indexes.sources import MODALITIES, Source


def iter_sources(path: str | Path) -> Iterator[Source]:
    path = Path(path)
    try:
        handle = path.open(encoding="utf-8")
    except FileNotFoundError:
        raise CorpusError(f"{path}: no such file") from None
    with handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{line_number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CorpusError(f"{where}: malformed JSON ({exc.msg})") from None
            if not isinstance(record, dict) or "id" not in record:
                raise CorpusError(f"{where}: each line must be an object with an 'id'")
            modality = record.get("modality", "text")
            if modality not in MODALITIES:
                raise CorpusError(f"{where}: modality must be 'image' or 'text', got {modality!r}")
            if modality == "image" and not record.get("image"):
                raise CorpusError(f"{where}: an image source needs an 'image' path")
            yield Source(
                id=str(record["id"]),
                modality=modality,
                title=str(record.get("title") or ""),
                text=str(record.get("text") or ""),
                url=str(record.get("url") or ""),
                image_ref=str(record["image"]) if modality == "image" else None,
            )
