"""ST-VQA: ANLS (tau 0.5) and exact-match accuracy, means over questions with gold answers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evaluation.errors import DatasetError
from evaluation.loaders.stvqa import STVQAItem
from evaluation.metrics.anls import anls_score, exact_match
from evaluation.scoring import ScoreReport, join


def score(
    items: Sequence[STVQAItem],
    predictions: Mapping[str, str],
    *,
    gold_label: str = "gold",
    pred_label: str = "predictions",
) -> ScoreReport:
    answered = [item for item in items if item.answers]
    if not answered:
        raise DatasetError(f"{gold_label}: no question has gold answers (test release?)")
    warnings: list[str] = []
    if len(answered) < len(items):
        warnings.append(f"{len(items) - len(answered)} questions without answers were skipped")
    matched = join(
        [i.question_id for i in answered], predictions, pred_label=pred_label, warnings=warnings
    )
    anls = [
        anls_score(p, item.answers or ()) if p is not None else 0.0
        for item, p in zip(answered, matched, strict=True)
    ]
    accuracy = [
        exact_match(p, item.answers or ()) if p is not None else 0.0
        for item, p in zip(answered, matched, strict=True)
    ]
    return ScoreReport(
        {"anls": sum(anls) / len(anls), "accuracy": sum(accuracy) / len(accuracy)}, warnings
    )
