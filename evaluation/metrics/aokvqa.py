"""A-OKVQA answer accuracy, as the official `eval_predictions.py` (allenai/aokvqa) computes it.

Exact string equality, no normalisation: a prediction that differs from the annotation only by
case or a trailing period scores 0, as on the leaderboard.
"""

from __future__ import annotations

from collections.abc import Sequence


def multiple_choice_correct(prediction: str, choices: Sequence[str], correct_index: int) -> float:
    """1.0 when the prediction is the correct choice's exact string."""
    return float(prediction == choices[correct_index])


def direct_answer_score(prediction: str, direct_answers: Sequence[str]) -> float:
    """VQA-style soft accuracy: min(1, number of the 10 annotators who gave it / 3)."""
    matches = sum(prediction == answer for answer in direct_answers)
    return min(1.0, matches / 3.0)
