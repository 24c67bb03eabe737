"""The OCR stage of an index build: read every image, store its lines, index their text.

It runs after the corpus pass has written the store (OCR is the slow step, and the store is
what it reads image references from). Lines below the confidence threshold are dropped here;
the kept ones go to the store (`sources/ocr.jsonl`), and their text, joined per image, to a
BM25 index of its own (`bm25-ocr/`, one document per store row, empty for rows without text),
so "bm25/ocr" scores live on their own scale. That index splits words at letter-digit
boundaries too: PP-OCR often glues a number to its word ("PLATFORM9", "OPEN7"). The text
embedder's "text-ocr" vectors are built
with the other dense components.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from mmrag.indexes.bm25 import OCR_BM25_DIR, BM25Index, BM25Params
from mmrag.indexes.executor import BuildExecutor, Progress, no_progress
from mmrag.indexes.images import ImageStore
from mmrag.indexes.manifest import describe_files
from mmrag.indexes.ocr.batch import BATCH_SIZE, OcrRunStats
from mmrag.indexes.ocr.cache import OcrCache
from mmrag.indexes.ocr.reader import (
    DEFAULT_MIN_CONFIDENCE,
    OcrModels,
    cuda_available,
    keep,
    reader_identity,
)
from mmrag.indexes.store import OcrLinesWriter, SourceStore

# Runs of letters, or of digits: "PLATFORM9" is two terms, as the sign meant.
OCR_SPLITTER = r"(?u)[^\W\d_]+|\d+"


@dataclass(frozen=True)
class OcrOptions:
    """How a build reads text in its images."""

    models: OcrModels = field(default_factory=OcrModels)
    min_confidence: float = DEFAULT_MIN_CONFIDENCE
    workers: int = 1
    batch_size: int = BATCH_SIZE
    cache: Path | None = None  # None: this build only, nothing survives a crash


def default_cache(out: Path) -> Path:
    """Beside the index, not in it: a killed build's temp folder goes, the cache stays."""
    return out.with_name(f"{out.name}.ocr-cache.jsonl")


def build_ocr(
    root: Path,
    store: SourceStore,
    images: ImageStore,
    options: OcrOptions,
    bm25: BM25Params,
    executor: BuildExecutor,
    *,
    progress: Progress = no_progress,
) -> tuple[dict[str, Any], dict[str, str]]:
    """Write the OCR lines and their BM25 index under `root`; return the manifest entries
    (the "ocr" summary and the "bm25-ocr" component) and the images that could not be read."""
    started = time.perf_counter()
    rows = np.asarray(store.rows_by_modality["image"])
    refs = [store.get(int(row)).image_ref or "" for row in rows]
    identity = reader_identity(options.models)
    stats = OcrRunStats()
    results = executor.read_text(images, refs, OcrCache(options.cache, identity), options, stats)
    writer = OcrLinesWriter(root, len(store))
    texts: dict[int, str] = {}
    lines_kept = 0
    for row, (_, lines) in zip(rows.tolist(), progress(results, "ocr", len(refs)), strict=True):
        kept = keep(lines or [], options.min_confidence)
        writer.add(row, kept)
        if kept:
            texts[row] = " ".join(line.text for line in kept)
            lines_kept += len(kept)
    writer.close()
    index = BM25Index.build(_per_row(texts, len(store)), replace(bm25, splitter=OCR_SPLITTER))
    index.save(root, OCR_BM25_DIR)
    summary = {
        "reader": identity,
        "device": "cuda" if cuda_available() else "cpu",
        "min_confidence": options.min_confidence,
        "images": len(refs),
        "images_with_text": len(texts),
        "lines": lines_kept,
        "cached": stats.cached,
        "read": stats.read,
        "unreadable": len(stats.unreadable),
        "seconds": round(time.perf_counter() - started, 1),
    }
    component = {"params": asdict(index.params), "files": describe_files(root, OCR_BM25_DIR)}
    return {"ocr": summary, OCR_BM25_DIR: component}, stats.unreadable


def _per_row(texts: dict[int, str], rows: int) -> Iterable[str]:
    return (texts.get(row, "") for row in range(rows))
