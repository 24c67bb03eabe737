"""WebQA: retrieval F1, fluency (FL), keyword accuracy (Acc) and FL x Acc, overall and per Qcate.

As on the leaderboard, each figure is a mean over questions (FL x Acc the mean of per-question
products). Questions without gold sources (test release) have no retrieval F1, questions without
`Keywords_A` (the public val release) no Acc; they are left out of those means, with a warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mmrag.evaluation.loaders.webqa import WebQAPrediction
from mmrag.evaluation.metrics.fluency import LogLikelihood, fluency_scores
from mmrag.evaluation.metrics.retrieval import source_f1
from mmrag.evaluation.metrics.webqa_acc import keyword_accuracies
from mmrag.evaluation.scoring import ScoreReport, join, mean
from mmrag.indexes.corpus.webqa import QCATES, WebQAQuestion


def _summary(rows: Sequence[dict[str, float | None]]) -> dict[str, float | None]:
    return {
        name: mean(row[name] for row in rows) for name in ("retrieval_f1", "fl", "acc", "fl_x_acc")
    }


def score(
    questions: Sequence[WebQAQuestion],
    predictions: Mapping[str, WebQAPrediction],
    *,
    fl: LogLikelihood | None = None,
    pred_label: str = "predictions",
) -> ScoreReport:
    """Score predictions against gold questions; `fl=None` skips fluency (fl, fl_x_acc null)."""
    warnings: list[str] = []
    matched = join(
        [q.guid for q in questions], predictions, pred_label=pred_label, warnings=warnings
    )
    have_sources = any(p.sources is not None for p in predictions.values())

    retrieval: list[float | None] = [None] * len(questions)
    if have_sources:
        for i, (question, prediction) in enumerate(zip(questions, matched, strict=True)):
            if question.gold_source_ids:
                sources = prediction.sources if prediction and prediction.sources else ()
                retrieval[i] = source_f1(sources, question.gold_source_ids)
        if (unsourced := sum(not q.gold_source_ids for q in questions)) > 0:
            warnings.append(f"{unsourced} questions have no gold sources: no retrieval F1")

    acc: list[float | None] = [None] * len(questions)
    keyed = [i for i, q in enumerate(questions) if q.keywords is not None]
    if len(keyed) < len(questions):
        warnings.append(
            f"{len(questions) - len(keyed)} questions have no Keywords_A: no accuracy for them"
        )
    answered_keyed = [i for i in keyed if matched[i] is not None]
    for i in keyed:
        acc[i] = 0.0
    if answered_keyed:
        values = keyword_accuracies(
            [matched[i].answer for i in answered_keyed],  # type: ignore[union-attr]
            [questions[i].keywords or "" for i in answered_keyed],
            [questions[i].qcate for i in answered_keyed],
        )
        for i, value in zip(answered_keyed, values, strict=True):
            acc[i] = value

    fluency: list[float | None] = [None] * len(questions)
    if fl is not None:
        answered = [i for i, p in enumerate(matched) if p is not None and questions[i].answers]
        for i, question in enumerate(questions):
            if question.answers:
                fluency[i] = 0.0
        values = fluency_scores(
            [matched[i].answer for i in answered],  # type: ignore[union-attr]
            [questions[i].answers for i in answered],
            fl,
        )
        for i, value in zip(answered, values, strict=True):
            fluency[i] = value

    rows = [
        {
            "retrieval_f1": retrieval[i],
            "fl": fluency[i],
            "acc": acc[i],
            "fl_x_acc": None if fluency[i] is None or acc[i] is None else fluency[i] * acc[i],
        }
        for i in range(len(questions))
    ]
    metrics: dict[str, Any] = _summary(rows)
    present = {q.qcate for q in questions}
    order = [c for c in QCATES if c in present] + sorted(present - set(QCATES))
    metrics["by_qcate"] = {
        qcate: {
            "n": sum(q.qcate == qcate for q in questions),
            **_summary([row for row, q in zip(rows, questions, strict=True) if q.qcate == qcate]),
        }
        for qcate in order
    }
    return ScoreReport(metrics, warnings)
