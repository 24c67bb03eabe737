"""What retrieval hands on: sources with the score and rank that put them there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from indexes.sources import Modality, Source

ModalityFilter = Literal["all", "image", "text"]


@dataclass(frozen=True, slots=True)
class Candidate:
    source: Source
    score: float
    rank: int
    retriever: str


def modality_of(choice: ModalityFilter) -> Modality | None:
    return None if choice == "all" else choice
