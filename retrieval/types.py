"""What retrieval hands on: sources with the score and rank that put them there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mmrag.indexes.sources import Modality, Source

ModalityFilter = Literal["all", "image", "text"]
RetrieverName = Literal["bm25", "text", "clip"]
# auto: calibrated when the index has a calibration, else rrf (raw for BM25 alone).
FusionMethod = Literal["auto", "raw", "rrf", "calibrated"]


@dataclass(frozen=True, slots=True)
class Candidate:
    source: Source
    score: float
    rank: int
    retriever: str


def modality_of(choice: ModalityFilter) -> Modality | None:
    return None if choice == "all" else choice
