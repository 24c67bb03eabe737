"""ST-VQA: ANLS (tau 0.5) and exact-match accuracy, means over questions with gold answers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mmrag.evaluation.loaders.stvqa import STVQAItem
from mmrag.evaluation.metrics.anls import anls_score, exact_match
from mmrag.evaluation.scoring import ScoreReport, answered, join


def score(
    items: Sequence[STVQAItem],
    predictions: Mapping[str, str],
    *,
    gold_label: str = "gold",
    pred_label: str = "predictions",
) -> ScoreReport:
    answered_items, warnings = answered(
        items,
        lambda item: bool(item.answers),
        gold_label=gold_label,
        none_message="no question has gold answers (test release?)",
    )
    matched = join(
        [i.question_id for i in answered_items],
        predictions,
        pred_label=pred_label,
        warnings=warnings,
    )
    anls = [
        anls_score(p, item.answers or ()) if p is not None else 0.0
        for item, p in zip(answered_items, matched, strict=True)
    ]
    accuracy = [
        exact_match(p, item.answers or ()) if p is not None else 0.0
        for item, p in zip(answered_items, matched, strict=True)
    ]
    return ScoreReport(
        {"anls": sum(anls) / len(anls), "accuracy": sum(accuracy) / len(accuracy)}, warnings
    )
