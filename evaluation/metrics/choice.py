"""Multiple-choice accuracy (VLQA): the chosen answer index equals the gold index."""

from __future__ import annotations


def choice_correct(predicted_index: int | None, gold_index: int) -> float:
    """1.0 for the right index; a missing prediction (None) is wrong."""
    return float(predicted_index is not None and predicted_index == gold_index)
