"""Per (retriever, modality) score calibration: Platt scaling fitted on held-out questions.

For each list ("bm25/image", "text/text", "clip/image", ...) a logistic curve maps raw score
to P(source is gold). Lists of the modality a question does not need contribute negatives, which
is what teaches the fusion when an image score is worth more than a snippet score.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mmrag.indexes.atomic import atomic_write_text
from mmrag.indexes.errors import InputError
from mmrag.indexes.manifest import CALIBRATION_FILE


def fit_logistic(
    scores: np.ndarray, labels: np.ndarray, l2: float = 1e-2, steps: int = 50
) -> tuple[float, float]:
    """(a, b) of P = sigmoid(a*score + b), by Newton's method with a little L2 on a.

    Scores are standardised first so one regulariser suits BM25 (0-30) and cosine (0-1) alike.
    """
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.float64)
    mean, std = scores.mean(), scores.std() or 1.0
    x = (scores - mean) / std
    design = np.stack([x, np.ones_like(x)], axis=1)
    weights = np.zeros(2)
    penalty = np.diag([l2, 1e-6]) * len(x)
    for _ in range(steps):
        p = 1 / (1 + np.exp(-design @ weights))
        gradient = design.T @ (p - labels) + penalty @ weights
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + penalty
        step = np.linalg.solve(hessian, gradient)
        weights -= step
        if np.abs(step).max() < 1e-8:
            break
    a = weights[0] / std
    return float(a), float(weights[1] - a * mean)


@dataclass
class Calibration:
    curves: dict[str, tuple[float, float]] = field(default_factory=dict)
    questions: int = 0
    depth: int = 0
    # The selection threshold on fused P(relevant) that maximised WebQA retrieval F1.
    threshold: float | None = None

    def probability(self, key: str, scores: np.ndarray) -> np.ndarray:
        if key not in self.curves:
            raise InputError(
                f"no calibration for {key}; rerun `mmrag retrieval calibrate` with these retrievers"
            )
        a, b = self.curves[key]
        return 1 / (1 + np.exp(-(a * np.asarray(scores, dtype=np.float64) + b)))

    def save(self, index_root: Path) -> Path:
        """Write the calibration file; `record_calibration` then lists it in the manifest."""
        path = index_root / CALIBRATION_FILE
        body = {
            "curves": self.curves,
            "questions": self.questions,
            "depth": self.depth,
            "threshold": self.threshold,
        }
        atomic_write_text(path, json.dumps(body, indent=2) + "\n")
        return path

    @classmethod
    def load(cls, index_root: Path) -> Calibration | None:
        path = index_root / CALIBRATION_FILE
        if not path.is_file():
            return None
        try:
            body = json.loads(path.read_text())
            curves = {key: (float(a), float(b)) for key, (a, b) in body["curves"].items()}
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(f"{path}: unreadable calibration ({exc})") from None
        return cls(
            curves=curves,
            questions=body.get("questions", 0),
            depth=body.get("depth", 0),
            threshold=body.get("threshold"),
        )
