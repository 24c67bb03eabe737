"""Fuse ranked lists from several (retriever, modality) pairs into one ranking.

Each list is keyed "retriever/modality" (e.g. "bm25/text", "clip/image") and holds store rows
with their raw scores. Raw scores are not comparable across lists: question-image CLIP
similarities sit systematically below question-snippet ones, so a raw merge never ranks an image
first. RRF compares ranks only; calibrated fusion maps each list's scores to P(relevant).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from mmrag.indexes.sources import OCR
from mmrag.retrieval.calibration import Calibration

RankedLists = dict[str, tuple[np.ndarray, np.ndarray]]
RRF_K = 60


def raw(lists: RankedLists) -> dict[int, float]:
    """Max raw score per row: only meaningful when every list shares one scale (one BM25 index)."""
    fused: dict[int, float] = {}
    for rows, scores in lists.values():
        for row, score in zip(rows.tolist(), scores.tolist(), strict=True):
            fused[row] = max(fused.get(row, -np.inf), score)
    return fused


def rrf(lists: RankedLists, k: int = RRF_K) -> dict[int, float]:
    """Reciprocal-rank fusion (Cormack et al. 2009): sum of 1 / (k + rank) over lists.

    An image's caption and its OCR text are two fields of one source: per retriever, an image
    gets the vote of its better-ranked field, not both ("text/image" and "text/ocr" summed
    would let images that merely have text in them outvote a snippet's single list).
    """
    votes: dict[tuple[str, int], float] = {}
    for key, (rows, _) in lists.items():
        retriever, _, field = key.partition("/")
        group = f"{retriever}/image" if field == OCR else key
        for rank, row in enumerate(rows.tolist(), start=1):
            vote = 1.0 / (k + rank)
            votes[group, row] = max(votes.get((group, row), 0.0), vote)
    fused: dict[int, float] = defaultdict(float)
    for (_, row), vote in votes.items():
        fused[row] += vote
    return dict(fused)


def calibrated(lists: RankedLists, calibration: Calibration) -> dict[int, float]:
    """Noisy-OR of calibrated probabilities: P(relevant) that at least one list vouches for."""
    miss: dict[int, float] = defaultdict(lambda: 1.0)
    for key, (rows, scores) in lists.items():
        for row, p in zip(
            rows.tolist(), calibration.probability(key, scores).tolist(), strict=True
        ):
            miss[row] *= 1.0 - p
    return {row: 1.0 - value for row, value in miss.items()}


def ranked(fused: dict[int, float], k: int) -> list[tuple[int, float]]:
    """Best k by fused score, ties broken by row for determinism."""
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:k]
