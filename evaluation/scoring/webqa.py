"""WebQA: retrieval F1, fluency (FL), keyword accuracy (Acc) and FL x Acc, overall and per Qcate,
and, with a verifier, the attribution of the answers (citation recall and precision, declines).

As on the leaderboard, each figure is a mean over questions (FL x Acc the mean of per-question
products). Questions without gold sources (test release) have no retrieval F1, questions without
`Keywords_A` (the public val release) no Acc; they are left out of those means, with a warning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mmrag.evaluation.loaders.webqa import WebQAPrediction
from mmrag.evaluation.metrics.attribution import METRICS as ATTRIBUTION_METRICS
from mmrag.evaluation.metrics.attribution import Attributed, attribution_row
from mmrag.evaluation.metrics.fluency import LogLikelihood, fluency_scores
from mmrag.evaluation.metrics.retrieval import source_f1
from mmrag.evaluation.metrics.webqa_acc import keyword_accuracies
from mmrag.evaluation.scoring import ScoreReport, join, mean
from mmrag.generation.types import SourceLike
from mmrag.generation.verification.attribution import Attributor
from mmrag.indexes.corpus.webqa import QCATES, WebQAQuestion


@dataclass(frozen=True)
class AttributionCheck:
    """What scoring attribution needs: the verifier, a way to read a cited source's text, and
    optionally the citations themselves (`eval run` knows them; a submission lists only
    `sources`, which then stand for the citations)."""

    attributor: Attributor
    lookup: Callable[[str], SourceLike | None]
    cited: Mapping[str, Sequence[str]] | None = None


def _summary(rows: Sequence[dict[str, float | None]]) -> dict[str, float | None]:
    names = dict.fromkeys(name for row in rows for name in row)
    return {name: mean(row[name] for row in rows) for name in names}


def _attribution(
    questions: Sequence[WebQAQuestion],
    matched: Sequence[WebQAPrediction | None],
    check: AttributionCheck,
    warnings: list[str],
) -> list[dict[str, float | None]]:
    rows, unknown = [], set()
    for question, prediction in zip(questions, matched, strict=True):
        if prediction is None:
            rows.append(dict.fromkeys(ATTRIBUTION_METRICS))
            continue
        ids = (check.cited or {}).get(question.guid, prediction.sources or ())
        found = [(source_id, check.lookup(source_id)) for source_id in ids]
        unknown.update(source_id for source_id, source in found if source is None)
        cited = [source for _, source in found if source is not None]
        item = Attributed(question.question, prediction.answer, cited)
        rows.append(attribution_row(item, check.attributor))
    if unknown:
        warnings.append(
            f"{len(unknown)} cited sources are not in the gold file (e.g. {sorted(unknown)[0]}), "
            "so nothing of theirs can support an answer; pass --index to read them from the index"
        )
    return rows


def score(
    questions: Sequence[WebQAQuestion],
    predictions: Mapping[str, WebQAPrediction],
    *,
    fl: LogLikelihood | None = None,
    attribution: AttributionCheck | None = None,
    pred_label: str = "predictions",
) -> ScoreReport:
    """Score predictions against gold questions; `fl=None` skips fluency (fl, fl_x_acc null),
    `attribution=None` citation recall and precision, decline and invented rates."""
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
    if attribution is not None:
        for row, attributed in zip(
            rows, _attribution(questions, matched, attribution, warnings), strict=True
        ):
            row.update(attributed)
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
