"""Score a WebQA run with `evaluation.scoring.webqa`, overall and per query type.

The paper reports full-setting retrieval separately for image and text queries, so the report
needs those subsets too; they are scored by the same function on the subset's questions, with
BART log-likelihoods memoised so each (reference, answer) pair is scored once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mmrag.evaluation.loaders.webqa import WebQAPrediction
from mmrag.evaluation.metrics.fluency import LogLikelihood
from mmrag.evaluation.scoring import ScoreReport
from mmrag.evaluation.scoring import webqa as scoring
from mmrag.indexes.corpus.webqa import WebQAQuestion


class MemoLogLikelihood:
    """A LogLikelihood that scores each distinct (source, target) pair once."""

    def __init__(self, inner: LogLikelihood) -> None:
        self.inner = inner
        self.cache: dict[tuple[str, str], float] = {}

    def __call__(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        new = [pair for pair in dict.fromkeys(pairs) if pair not in self.cache]
        if new:
            self.cache.update(zip(new, self.inner(new), strict=True))
        return [self.cache[pair] for pair in pairs]


@dataclass
class WebQAScores:
    overall: ScoreReport  # metrics: retrieval_f1, fl, acc, fl_x_acc and by_qcate
    by_query_type: dict[str, dict[str, Any]] = field(default_factory=dict)


def query_type(question: WebQAQuestion) -> str | None:
    """WebQA's split of questions by the modality of their gold sources (None: no gold)."""
    if question.is_image_query:
        return "image queries"
    return "text queries" if question.pos_sources else None


def score_run(
    questions: Sequence[WebQAQuestion],
    predictions: Mapping[str, WebQAPrediction],
    *,
    fl: LogLikelihood | None,
    pred_label: str,
) -> WebQAScores:
    memo = MemoLogLikelihood(fl) if fl is not None else None
    overall = scoring.score(questions, predictions, fl=memo, pred_label=pred_label)
    by_type: dict[str, dict[str, Any]] = {}
    for name in ("image queries", "text queries"):
        subset = [q for q in questions if query_type(q) == name]
        if subset:
            metrics = scoring.score(subset, predictions, fl=memo, pred_label=pred_label).metrics
            metrics.pop("by_qcate")
            by_type[name] = {"n": len(subset), **metrics}
    return WebQAScores(overall, by_type)
