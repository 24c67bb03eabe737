"""WebQA retrieval F1: set overlap between predicted and gold (positive) source ids."""

from __future__ import annotations

from collections.abc import Iterable


def source_f1(predicted: Iterable[str], gold: Iterable[str]) -> float:
    """F1 of one question's predicted source ids against its gold ids (duplicates count once).

    Zero overlap (an empty prediction included) scores 0; the caller skips questions without
    gold sources (the test release hides them), since F1 is undefined there.
    """
    predicted_set, gold_set = set(predicted), set(gold)
    if not gold_set:
        raise ValueError("source F1 is undefined for a question without gold sources")
    hits = len(predicted_set & gold_set)
    if hits == 0:
        return 0.0
    precision = hits / len(predicted_set)
    recall = hits / len(gold_set)
    return 2 * precision * recall / (precision + recall)
