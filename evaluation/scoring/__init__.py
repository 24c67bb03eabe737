"""Scoring a benchmark: join loaded gold items to loaded predictions and apply the metrics.

One module per benchmark, each with a `score(...) -> ScoreReport`. The CLI (`mmrag eval score`)
and, later, `mmrag eval run` both go through these, so the numbers cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from mmrag.evaluation.errors import DatasetError

T = TypeVar("T")


@dataclass
class ScoreReport:
    """The metrics (a JSON-ready dict) and what the user should know about how they were got."""

    metrics: dict[str, Any]
    warnings: list[str] = field(default_factory=list)


def answered(
    items: Sequence[T], has_answer: Callable[[T], bool], *, gold_label: str, none_message: str
) -> tuple[list[T], list[str]]:
    """The items that have gold answers, and a warning naming how many were skipped."""
    kept = [item for item in items if has_answer(item)]
    if not kept:
        raise DatasetError(f"{gold_label}: {none_message}")
    skipped = len(items) - len(kept)
    return kept, [f"{skipped} questions without answers were skipped"] if skipped else []


def mean(values: Iterable[float | None]) -> float | None:
    """Mean of the values that exist; None (JSON null) when there are none."""
    present = [value for value in values if value is not None]
    return sum(present) / len(present) if present else None


def join(
    gold_ids: Sequence[str],
    predictions: Mapping[str, T],
    *,
    pred_label: str,
    warnings: list[str],
    what: str = "question",
) -> list[T | None]:
    """Predictions in gold order, None where a gold item has none (it then scores 0).

    A prediction file that matches no gold item at all is almost certainly for another
    benchmark or split: refused rather than scored 0.
    """
    matched = [predictions.get(gold_id) for gold_id in gold_ids]
    found = sum(item is not None for item in matched)
    if found == 0:
        example = next(iter(predictions), None)
        raise DatasetError(
            f"{pred_label}: none of its {len(predictions)} predictions matches a gold {what} "
            f"(first prediction id {example!r}); is it for this benchmark and split?"
        )
    if found < len(gold_ids):
        warnings.append(
            f"{len(gold_ids) - found} of {len(gold_ids)} gold {what}s have no prediction "
            "in the prediction file; they score 0"
        )
    extra = len(predictions) - found
    if extra > 0:
        warnings.append(f"{extra} predictions match no gold {what} and were ignored")
    return matched
