"""VLQA: multiple-choice accuracy over questions with a gold answer index."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evaluation.errors import DatasetError
from evaluation.loaders.vlqa import VLQAItem
from evaluation.metrics.choice import choice_correct
from evaluation.scoring import ScoreReport, join


def score(
    items: Sequence[VLQAItem],
    predictions: Mapping[str, int],
    *,
    gold_label: str = "gold",
    pred_label: str = "predictions",
) -> ScoreReport:
    answered = [item for item in items if item.answer is not None]
    if not answered:
        raise DatasetError(f"{gold_label}: no question has a gold answer index")
    warnings: list[str] = []
    if len(answered) < len(items):
        warnings.append(f"{len(items) - len(answered)} questions without answers were skipped")
    matched = join(
        [i.question_id for i in answered], predictions, pred_label=pred_label, warnings=warnings
    )
    correct = [
        choice_correct(p, item.answer)  # type: ignore[arg-type]
        for item, p in zip(answered, matched, strict=True)
    ]
    return ScoreReport({"accuracy": sum(correct) / len(correct)}, warnings)
