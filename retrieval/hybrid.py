"""Hybrid search: BM25, text-embedding and CLIP lists per modality, fused into one ranking.

Every retriever searches each modality separately ("bm25/image", "bm25/text", "text/image",
"text/text", "clip/image") so that `modality` can restrict cheaply and fusion sees each list's
own score scale. An index built with OCR adds lists over the text read in images ("bm25/ocr",
"text/ocr"; their rows are images), fused and calibrated like any other. `fusion="raw"` (BM25
alone) merges raw scores, which share one index's statistics; across retrievers (or with OCR
lists, which have their own BM25 statistics) use "rrf" or "calibrated".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import get_args

import numpy as np

from mmrag.indexes.bm25 import best_of
from mmrag.indexes.collection import Collection
from mmrag.indexes.encoders.base import EncoderInfo
from mmrag.indexes.encoders.batching import shared_batcher
from mmrag.indexes.encoders.loading import check_same_encoder, encoder_for
from mmrag.indexes.errors import InputError
from mmrag.indexes.sources import MODALITIES, OCR, Modality
from mmrag.indexes.store import MODALITY_CODES
from mmrag.retrieval import fusion
from mmrag.retrieval.calibration import Calibration, fit_logistic
from mmrag.retrieval.rerank import Objective, fit_threshold
from mmrag.retrieval.types import (
    Candidate,
    FusionMethod,
    ModalityFilter,
    RetrieverName,
    modality_of,
)

RETRIEVERS: tuple[RetrieverName, ...] = get_args(RetrieverName)
FUSIONS: tuple[FusionMethod, ...] = get_args(FusionMethod)
DEFAULT_DEPTH = 50


def checked_question(question: str, k: int) -> str:
    question = question.strip()
    if not question:
        raise InputError("the question is empty")
    if k < 1:
        raise InputError(f"k must be at least 1, got {k}")
    return question


class HybridRetriever:
    def __init__(
        self,
        collection: Collection,
        retrievers: Sequence[str] | None = None,
        fusion_method: str = "auto",
        *,
        depth: int = DEFAULT_DEPTH,
        device: str | None = None,
    ) -> None:
        self.collection = collection
        available = self.available(collection)
        chosen = list(retrievers or available)
        for name in chosen:
            if name not in RETRIEVERS:
                raise InputError(f"unknown retriever {name!r}; choose from {', '.join(RETRIEVERS)}")
            if name not in available:
                raise InputError(
                    f"retriever {name!r} is not in this index (built: {', '.join(available)}); "
                    "rebuild with `mmrag index build` and its encoder"
                )
        self.retrievers = chosen
        self.calibration = Calibration.load(collection.root)
        self.fusion = self._fusion(fusion_method)
        self.depth = depth
        self.device = device
        self._encoders = {
            kind: self._encoder(kind, device) for kind in ("text", "clip") if kind in chosen
        }

    @staticmethod
    def available(collection: Collection) -> list[str]:
        kinds = {name.split("-")[0] for name in collection.dense_components}
        return ["bm25", *(kind for kind in ("text", "clip") if kind in kinds)]

    def _fusion(self, method: str) -> str:
        if method not in FUSIONS:
            raise InputError(f"unknown fusion {method!r}; choose from {', '.join(FUSIONS)}")
        if method == "auto":
            if self.retrievers == ["bm25"] and self.collection.ocr_bm25 is None:
                return "raw"
            return "calibrated" if self.calibration else "rrf"
        if method == "calibrated" and self.calibration is None:
            raise InputError(
                f"{self.collection.root} has no calibration; run `mmrag retrieval calibrate` "
                "or use --fusion rrf"
            )
        if method == "raw" and (len(self.retrievers) > 1 or self.collection.ocr_bm25 is not None):
            raise InputError(
                "raw scores of different retrievers (or of OCR text) are not comparable; use rrf"
            )
        return method

    def _encoder(self, kind: str, device: str | None):
        """Load the encoder the index was built with, and prove it embeds the same way."""
        entry = next(e for n, e in self.collection.dense_components.items() if n.startswith(kind))
        info = EncoderInfo(**entry["encoder"])
        encoder = encoder_for(info, device)
        check_same_encoder(info, entry["probe"], encoder)
        return shared_batcher(encoder)

    def fields(self, modalities: Iterable[Modality]) -> list[str]:
        """The lists a search covers: one per modality, and "ocr" beside images when the index
        has text read in them."""
        fields: list[str] = []
        for modality in modalities:
            fields.append(modality)
            if modality == "image" and self.collection.ocr_bm25 is not None:
                fields.append(OCR)
        return fields

    def _bm25_scores(self, question: str, fields: list[str]) -> dict[str, np.ndarray]:
        """BM25 scores of every row per field: the corpus text, or the OCR text."""
        main = self.collection.bm25.scores(question)
        ocr = self.collection.ocr_bm25.scores(question) if OCR in fields else None
        return {field: ocr if field == OCR else main for field in fields}

    def _bm25_hits(
        self, question: str, fields: list[str]
    ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per field, the rows of its modality that score above zero and their scores."""
        main = self.collection.bm25.hits(question)
        ocr = self.collection.ocr_bm25.hits(question) if OCR in fields else None
        codes = np.asarray(self.collection.store.modality_codes)
        hits = {}
        for field in fields:
            rows, values = ocr if field == OCR else main
            keep = codes.take(rows) == MODALITY_CODES["image" if field == OCR else field]
            hits[field] = (rows.compress(keep), values.compress(keep))
        return hits

    def ranked_lists(
        self, question: str, modalities: Iterable[Modality] = MODALITIES, depth: int | None = None
    ) -> fusion.RankedLists:
        depth = depth or self.depth
        fields = self.fields(modalities)
        lists: fusion.RankedLists = {}
        if "bm25" in self.retrievers:
            # Rows sharing no term with the question are not hits: only the others are ranked.
            for field, (rows, values) in self._bm25_hits(question, fields).items():
                lists[f"bm25/{field}"] = best_of(values, rows, depth)
        for kind, encoder in self._encoders.items():
            query = encoder.encode_texts([question])
            for field in fields:
                name = f"{kind}-{field}"
                if name in self.collection.dense_components:
                    rows, values = self.collection.dense(name, self.device).search(query, depth)
                    keep = rows[0] >= 0
                    lists[f"{kind}/{field}"] = (rows[0][keep], values[0][keep])
        return lists

    def fuse(self, lists: fusion.RankedLists) -> dict[int, float]:
        if self.fusion == "raw":
            return fusion.raw(lists)
        if self.fusion == "rrf":
            return fusion.rrf(lists)
        return fusion.calibrated(lists, self.calibration)

    def search(
        self, question: str, k: int = 10, modality: ModalityFilter = "all"
    ) -> list[Candidate]:
        question = checked_question(question, k)
        wanted = modality_of(modality)
        lists = self.ranked_lists(
            question, MODALITIES if wanted is None else [wanted], max(k, self.depth)
        )
        return self._candidates(fusion.ranked(self.fuse(lists), k))

    def _candidates(self, ranked: list[tuple[int, float]]) -> list[Candidate]:
        store = self.collection.store
        label = "+".join(self.retrievers) + ("" if self.fusion == "raw" else f":{self.fusion}")
        return [
            Candidate(source=store.get(row), score=float(score), rank=rank, retriever=label)
            for rank, (row, score) in enumerate(ranked, start=1)
        ]

    def rank_among(self, question: str, source_ids: Sequence[str]) -> list[Candidate]:
        """Rank a given candidate set, e.g. WebQA's restricted setting (a question's own facts).

        The same lists and fusion as `search`, but scored exactly over these sources only;
        every candidate comes back, those no list scored last. Unknown ids are refused.
        """
        question = checked_question(question, 1)
        store = self.collection.store
        rows = []
        for source_id in dict.fromkeys(source_ids):
            row = store.row_of(source_id)
            if row is None:
                raise InputError(f"source {source_id!r} is not in {self.collection.root}")
            rows.append(row)
        rows_array = np.array(sorted(rows), dtype=np.int64)
        codes = np.asarray(store.modality_codes)[rows_array]
        fields = self.fields(MODALITIES)
        bm25 = self._bm25_scores(question, fields) if "bm25" in self.retrievers else None
        queries = {kind: enc.encode_texts([question])[0] for kind, enc in self._encoders.items()}
        lists: fusion.RankedLists = {}
        for field in fields:
            subset = rows_array[codes == MODALITY_CODES["image" if field == OCR else field]]
            if bm25 is not None:
                values = bm25[field][subset]
                lists[f"bm25/{field}"] = best_first(subset[values > 0], values[values > 0])
            for kind, query in queries.items():
                name = f"{kind}-{field}"
                if name in self.collection.dense_components:
                    dense = self.collection.dense(name, self.device)
                    scored = subset[np.isin(subset, dense.rows)]  # OCR: images with text only
                    values = dense.scores_of(query, scored)
                    lists[f"{kind}/{field}"] = best_first(scored, values)
        fused = {row: 0.0 for row in rows} | self.fuse(lists)
        return self._candidates(fusion.ranked(fused, len(fused)))


def fit_calibration(
    retriever: HybridRetriever,
    questions: Iterable[tuple[str, Sequence[str]]],
    objective: Objective,
    depth: int = 20,
    max_sources: int = 2,
) -> Calibration:
    """Fit one logistic curve per list from (question, gold source ids) pairs, then the
    selection threshold on the fused probabilities that maximises `objective` (WebQA's
    retrieval F1 in `mmrag retrieval calibrate`)."""
    store = retriever.collection.store
    scores: dict[str, list[float]] = {}
    labels: dict[str, list[int]] = {}
    seen: list[tuple[str, fusion.RankedLists, set[str]]] = []
    for question, gold_ids in questions:
        gold = set(gold_ids)
        lists = retriever.ranked_lists(question, depth=depth)
        seen.append((question, lists, gold))
        for key, (rows, values) in lists.items():
            scores.setdefault(key, []).extend(values.tolist())
            labels.setdefault(key, []).extend(int(store.get(int(r)).id in gold) for r in rows)
    if not seen:
        raise InputError("no questions to calibrate on")
    calibration = Calibration(
        curves={
            key: fit_logistic(np.array(v), np.array(labels[key])) for key, v in scores.items() if v
        },
        questions=len(seen),
        depth=depth,
    )
    fused = [
        (
            question,
            [
                Candidate(store.get(row), p, rank, "calibrated")
                for rank, (row, p) in enumerate(
                    fusion.ranked(fusion.calibrated(lists, calibration), depth), 1
                )
            ],
            gold,
        )
        for question, lists, gold in seen
    ]
    calibration.threshold, _ = fit_threshold(fused, max_sources, objective)
    return calibration


def best_first(rows: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((rows, -scores))
    return rows[order], scores[order]
