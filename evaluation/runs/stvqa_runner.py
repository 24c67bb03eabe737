"""What answers one ST-VQA question: the scene-text answerer (`generation.scene_text`) over
the lines PP-OCR read in its image before the question loop (`read_images`, in parallel and
through a cache keyed by image content, so a rerun or a resumed run reads no image twice).
This process, or each Ray worker, builds one with `build_runner`.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmrag.evaluation.loaders.stvqa import STVQAItem
from mmrag.evaluation.runs.checkpoint import sibling
from mmrag.generation.reading.question import read_question

if TYPE_CHECKING:  # models load only when a run starts; `mmrag --help` stays instant
    from mmrag.core.settings import Settings
    from mmrag.generation.scene_text import SceneTextAnswerer


@dataclass
class STVQARunner:
    """Answers one question from its image's OCR lines; returns what the checkpoint stores."""

    answerer: SceneTextAnswerer
    lines: dict[str, list[str]]  # image path -> kept OCR lines, read before the question loop
    root: Path

    def __call__(self, item: STVQAItem) -> dict[str, Any]:
        started = time.perf_counter()
        lines = self.lines.get(item.image) or []
        accepts_images = self.answerer.engine.info.accepts_images
        image = (self.root / item.image).read_bytes() if accepts_images else None
        result = self.answerer.answer(read_question(item.question), lines, image=image)
        return {
            "prediction": result.answer,
            "free": result.free,
            "ocr_lines": lines,
            "candidates": result.candidates,
            "timings": {**result.timings, "total_s": time.perf_counter() - started},
        }


def build_runner(
    settings: Settings, *, mode: str, lines: dict[str, list[str]], root: Path
) -> STVQARunner:
    """A runner with its own answerer, over the lines OCR read before the question loop: what
    this process, or each Ray worker, builds."""
    from mmrag.core.components import build_engine, minilm_embed
    from mmrag.generation.scene_text import SceneTextAnswerer

    embed = minilm_embed() if mode == "similarity" else None
    return STVQARunner(
        SceneTextAnswerer(build_engine(settings), mode=mode, embed=embed), lines, root
    )


def read_images(
    items: Sequence[STVQAItem], root: Path, args: argparse.Namespace, settings: Settings
) -> dict[str, list[str]]:
    """The kept OCR lines of every distinct image, read in parallel through the cache."""
    from tqdm import tqdm

    from mmrag.indexes.ocr.batch import OcrRunStats, ocr_images
    from mmrag.indexes.ocr.cache import OcrCache
    from mmrag.indexes.ocr.reader import keep, reader_identity

    paths = sorted({item.image for item in items})
    path = args.ocr_cache or sibling(args.out, ".ocr.jsonl")
    cache = OcrCache(path, reader_identity(settings.ocr_models))
    results = ocr_images(
        paths,
        lambda ref: (root / ref).read_bytes(),
        cache,
        models=settings.ocr_models,
        workers=args.ocr_workers,
        max_pixels=settings.max_image_pixels,
        stats=OcrRunStats(),
    )
    bar = tqdm(results, total=len(paths), desc="ocr", unit=" images", disable=None)
    return {
        ref: [line.text for line in keep(lines or [], settings.ocr_min_confidence)]
        for ref, lines in bar
    }
