"""VLQA: multiple-choice accuracy over questions with a gold answer index."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mmrag.evaluation.loaders.vlqa import VLQAItem, by_position
from mmrag.evaluation.metrics.choice import choice_correct
from mmrag.evaluation.scoring import ScoreReport, answered, join


def score(
    items: Sequence[VLQAItem],
    predictions: Mapping[str, int] | Sequence[int],
    *,
    gold_label: str = "gold",
    pred_label: str = "predictions",
) -> ScoreReport:
    """Accuracy over the items with a gold answer. Official predictions (a list in gold order)
    are matched to the items by position first."""
    if not isinstance(predictions, Mapping):
        predictions = by_position(items, predictions, pred_label=pred_label)
    answered_items, warnings = answered(
        items,
        lambda item: bool(item.answer is not None),
        gold_label=gold_label,
        none_message="no question has a gold answer index",
    )
    matched = join(
        [i.question_id for i in answered_items],
        predictions,
        pred_label=pred_label,
        warnings=warnings,
    )
    correct = [
        choice_correct(p, item.answer)  # type: ignore[arg-type]
        for item, p in zip(answered_items, matched, strict=True)
    ]
    return ScoreReport({"accuracy": sum(correct) / len(correct)}, warnings)
