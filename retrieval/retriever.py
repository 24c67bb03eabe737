"""Query-time search over a loaded index.

Modality-aware: `modality="all"` ranks both modalities in one list; "image"/"text" restrict
to one; `search_per_modality` returns each modality's own top-k from the same scoring pass.
"""

from __future__ import annotations

from indexes.bm25 import top_k
from indexes.collection import Collection
from indexes.errors import InputError
from indexes.sources import MODALITIES, Modality
from retrieval.types import Candidate, ModalityFilter, modality_of


def _checked(question: str, k: int) -> str:
    question = question.strip()
    if not question:
        raise InputError("the question is empty")
    if k < 1:
        raise InputError(f"k must be at least 1, got {k}")
    return question


class Retriever:
    name = "bm25"

    def __init__(self, collection: Collection) -> None:
        self.collection = collection

    def _candidates(self, rows, scores) -> list[Candidate]:
        store = self.collection.store
        return [
            Candidate(
                source=store.get(int(row)), score=float(score), rank=rank, retriever=self.name
            )
            for rank, (row, score) in enumerate(zip(rows, scores, strict=True), start=1)
        ]

    def search(
        self, question: str, k: int = 10, modality: ModalityFilter = "all"
    ) -> list[Candidate]:
        question = _checked(question, k)
        rows, scores = self.collection.bm25.search(
            question, k, self.collection.rows(modality_of(modality))
        )
        return self._candidates(rows, scores)

    def search_per_modality(self, question: str, k: int = 10) -> dict[Modality, list[Candidate]]:
        question = _checked(question, k)
        scores = self.collection.bm25.scores(question)
        return {
            modality: self._candidates(*top_k(scores, k, self.collection.rows(modality)))
            for modality in MODALITIES
        }
