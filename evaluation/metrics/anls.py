"""ST-VQA's Average Normalized Levenshtein Similarity and exact-match accuracy.

Per question: max over gold answers of s = 1 - NL when NL < tau (0.5), else 0, where NL is the
Levenshtein distance divided by the longer string's length, both strings lower-cased and
stripped. ANLS is the mean over questions.
"""

from __future__ import annotations

from collections.abc import Sequence

TAU = 0.5


def levenshtein(a: str, b: str) -> int:
    """Edit distance (insertions, deletions, substitutions each cost 1)."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b))
            )
        previous = current
    return previous[-1]


def normalized_levenshtein(a: str, b: str) -> float:
    """NL in [0, 1]; two empty strings are identical (0)."""
    longest = max(len(a), len(b))
    return levenshtein(a, b) / longest if longest else 0.0


def anls_score(prediction: str, answers: Sequence[str], tau: float = TAU) -> float:
    """One question's ANLS contribution (0 for a question without gold answers)."""
    predicted = prediction.strip().lower()
    best = 0.0
    for answer in answers:
        distance = normalized_levenshtein(answer.strip().lower(), predicted)
        best = max(best, 1.0 - distance if distance < tau else 0.0)
    return best


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """1.0 when the prediction equals a gold answer after lower-casing and stripping."""
    predicted = prediction.strip().lower()
    return float(any(answer.strip().lower() == predicted for answer in answers))
