"""VLP-style source selection: score each (question, source) pair jointly, keep the few that answer.

WebQA's VLP baseline scores every candidate pointwise as a relevance probability and keeps those
above 0.2. Scorers here return P(relevant) in [0, 1] per candidate: a cross-encoder over the
caption or snippet, or an instruction model's P("yes") (the LM judge, whose prompts live in
`generation`; `service` hands it in through the `RelevanceJudge` protocol so retrieval never
imports generation).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Protocol

import numpy as np
from pydantic import AfterValidator

from mmrag.indexes.errors import InputError
from mmrag.indexes.sources import Source
from mmrag.retrieval.types import Candidate

VLP_THRESHOLD = 0.2
RERANKERS = ("auto", "none", "lm-judge", "cross-encoder:NAME_OR_PATH")


def _known_reranker(choice: str) -> str:
    if choice in RERANKERS[:3] or (choice.startswith("cross-encoder:") and choice[14:].strip()):
        return choice
    raise ValueError(f"unknown reranker {choice!r}; use {', '.join(RERANKERS)}")


# auto: the calibrated retrieval scores are the relevance; none: keep the top candidates;
# lm-judge: the generator's P("yes"); cross-encoder:NAME_OR_PATH: a sentence-transformers model.
RerankerChoice = Annotated[str, AfterValidator(_known_reranker)]


class RelevanceScorer(Protocol):
    name: str

    def relevance(self, question: str, sources: Sequence[Source]) -> np.ndarray: ...


class RelevanceJudge(Protocol):
    """What an LM judge offers: P(the source answers the question)."""

    def relevance(self, question: str, source: Source) -> float: ...


class CrossEncoderScorer:
    """sentence-transformers CrossEncoder by hub name or path; logits become probabilities.

    It reads a source's title and text and, for images, the text OCR read in them: a sign's
    words are often the only thing that relates a photo to the question."""

    def __init__(
        self, name_or_path: str, *, device: str | None = None, batch_size: int = 32
    ) -> None:
        from sentence_transformers import CrossEncoder

        from mmrag.indexes.encoders.base import pick_device, quiet_model_loading

        quiet_model_loading()
        try:
            self.model = CrossEncoder(name_or_path, device=pick_device(device))
        except (OSError, ValueError) as exc:
            hint = "" if Path(name_or_path).exists() else " (pass a local directory when offline)"
            raise InputError(f"cannot load cross-encoder {name_or_path!r}{hint}: {exc}") from None
        self.name = f"cross-encoder:{name_or_path}"
        self.batch_size = batch_size

    def relevance(self, question: str, sources: Sequence[Source]) -> np.ndarray:
        if not sources:
            return np.empty(0)
        pairs = [(question, source.evidence_text) for source in sources]  # OCR text included
        # One-logit heads get a sigmoid from sentence-transformers; several labels a softmax,
        # whose last column is the "relevant" class by convention.
        scores = np.asarray(
            self.model.predict(
                pairs,
                batch_size=self.batch_size,
                show_progress_bar=False,
                apply_softmax=self.model.num_labels > 1,
            )
        )
        return scores if scores.ndim == 1 else scores[:, -1]


class JudgeScorer:
    """An LM judge, one candidate at a time (each is its own prompt)."""

    def __init__(self, judge: RelevanceJudge, name: str = "lm-judge") -> None:
        self.judge = judge
        self.name = name

    def relevance(self, question: str, sources: Sequence[Source]) -> np.ndarray:
        return np.array([self.judge.relevance(question, source) for source in sources])


@dataclass(frozen=True)
class ScoredSource:
    source: Source
    relevance: float
    retrieval_score: float
    retrieval_rank: int


@dataclass
class Selection:
    selected: list[ScoredSource]
    considered: list[ScoredSource]


NEAR_TIE = 0.9  # below the threshold, candidates within 10% of the best one are kept with it


class SourceSelector:
    """Top-k candidates in, the sources above `threshold` (at most `max_sources`) out.

    With `min_sources=1` the best candidate is kept even below the threshold, since an answer
    needs something to cite, with any runner-up nearly as relevant (`NEAR_TIE`); set it to 0
    to let "nothing relevant" through. Without a scorer the
    candidates' own scores are the relevance: right when calibrated fusion made them P(relevant).
    """

    def __init__(
        self,
        scorer: RelevanceScorer | None,
        *,
        threshold: float = VLP_THRESHOLD,
        max_sources: int = 2,
        k: int = 20,
        min_sources: int = 1,
    ) -> None:
        if not 0 <= threshold <= 1:
            raise InputError(f"the relevance threshold must be in [0, 1], got {threshold}")
        if max_sources < 1 or k < 1 or not 0 <= min_sources <= max_sources:
            raise InputError("need k >= 1, max_sources >= 1 and 0 <= min_sources <= max_sources")
        self.scorer = scorer
        self.threshold = threshold
        self.max_sources = max_sources
        self.k = k
        self.min_sources = min_sources

    def select(
        self, question: str, candidates: Sequence[Candidate], *, max_sources: int | None = None
    ) -> Selection:
        """`max_sources` overrides the selector's cap for this question only."""
        cap = self.max_sources if max_sources is None else max_sources
        if cap < 1:
            raise InputError(f"max_sources must be at least 1, got {cap}")
        pool = list(candidates)[: self.k]
        if self.scorer is None:
            relevance = np.array([c.score for c in pool])
        else:
            relevance = self.scorer.relevance(question, [c.source for c in pool])
        considered = sorted(
            (
                ScoredSource(c.source, float(p), c.score, c.rank)
                for c, p in zip(pool, relevance, strict=True)
            ),
            key=lambda s: (-s.relevance, s.retrieval_rank),
        )
        above = [s for s in considered if s.relevance >= self.threshold]
        chosen = max(len(above), min(self.min_sources, len(considered)))
        if not above and chosen:
            # Kept only because an answer needs something to cite: a runner-up as relevant as
            # the best is as likely to hold the answer, and a hair's difference decides nothing.
            floor = considered[chosen - 1].relevance * NEAR_TIE
            chosen += sum(1 for s in considered[chosen:cap] if s.relevance >= floor)
        return Selection(
            selected=considered[: min(chosen, cap)],
            considered=considered,
        )


THRESHOLD_GRID = tuple(round(0.05 * n, 2) for n in range(1, 19))


# A per-question score of selected source ids against gold ids, e.g. WebQA's retrieval F1
# (`mmrag.evaluation.metrics.retrieval.source_f1`); handed in, so retrieval owns no metric.
Objective = Callable[[Sequence[str], Sequence[str]], float]


def fit_threshold(
    questions: Sequence[tuple[str, Sequence[Candidate], Sequence[str]]],
    max_sources: int,
    objective: Objective,
) -> tuple[float, dict[float, float]]:
    """The relevance threshold that maximises the mean objective over held-out questions.

    `questions` are (question, candidates whose scores are P(relevant), gold ids). Selection
    runs through `SourceSelector` itself, so the fitted rule is exactly the served one. Returns
    the best threshold (the lowest among ties) and the mean objective at every threshold tried.
    """
    f1_at: dict[float, float] = {}
    for threshold in THRESHOLD_GRID:
        selector = SourceSelector(None, threshold=threshold, max_sources=max_sources)
        f1s = [
            objective([s.source.id for s in selector.select(q, candidates).selected], gold)
            for q, candidates, gold in questions
            if gold
        ]
        f1_at[threshold] = float(np.mean(f1s)) if f1s else 0.0
    best = max(THRESHOLD_GRID, key=lambda t: (f1_at[t], -t))
    return best, f1_at
