"""Plain JSONL corpora for users' own collections: one source per line.

Each line: {"id": str, "modality": "image"|"text", "title": str, "text": str, "url": str,
"image": path of the image file relative to the JSONL file (images only)}.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path

from mmrag.indexes.corpus.limits import MAX_LINE_BYTES, JSONLimitError, loads
from mmrag.indexes.errors import CorpusError
from mmrag.indexes.sources import MODALITIES, Source

LINE_READ = MAX_LINE_BYTES + 1  # one byte past the limit tells a line too long


def iter_sources(path: str | Path) -> Iterator[tuple[str, Source]]:
    """Sources line by line, each with its `file:line`. Lines end at newlines, as JSON Lines
    says (a carriage return before one is whitespace to JSON), and each is decoded alone so
    that an error names it."""
    path = Path(path)
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise CorpusError(f"{path}: no such file") from None
    with handle:
        for line_number, raw in enumerate(iter(partial(handle.readline, LINE_READ), b""), 1):
            where = f"{path}:{line_number}"
            if len(raw) > MAX_LINE_BYTES:  # refused before the rest of it is read
                raise CorpusError(f"{where}: a line longer than {MAX_LINE_BYTES:,} bytes")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CorpusError(
                    f"{where}: not UTF-8 text (byte {exc.start} in the line)"
                ) from None
            if not line.strip():
                continue
            try:
                record = loads(line)
            except json.JSONDecodeError as exc:
                raise CorpusError(f"{where}: malformed JSON ({exc.msg})") from None
            except JSONLimitError as exc:
                raise CorpusError(f"{where}: {exc}") from None
            if not isinstance(record, dict) or "id" not in record:
                raise CorpusError(f"{where}: each line must be an object with an 'id'")
            ident = record["id"]
            if isinstance(ident, bool) or not isinstance(ident, str | int):
                # str() made null "None" and false "False": ids no one wrote
                kind = "null" if ident is None else type(ident).__name__
                raise CorpusError(f"{where}: 'id' must be a string or an integer, got {kind}")
            modality = record.get("modality", "text")
            if modality not in MODALITIES:
                raise CorpusError(f"{where}: modality must be 'image' or 'text', got {modality!r}")
            image = record.get("image")
            if modality == "image" and not (isinstance(image, str) and image):
                raise CorpusError(f"{where}: an image source needs an 'image' path")
            if modality == "image" and "\x00" in image:
                raise CorpusError(f"{where}: the 'image' path holds a NUL character")
            yield (
                where,
                Source(
                    id=str(ident),
                    modality=modality,
                    title=str(record.get("title") or ""),
                    text=str(record.get("text") or ""),
                    url=str(record.get("url") or ""),
                    image_ref=image if modality == "image" else None,
                ),
            )
