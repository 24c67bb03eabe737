"""Bounding-box IoU for Toloka VQA (WSDM Cup 2023): continuous pixel coordinates, as the
competition computes it (a box [l, r] is r - l wide, not r - l + 1)."""

from __future__ import annotations

from typing import NamedTuple


class Box(NamedTuple):
    left: float
    top: float
    right: float
    bottom: float

    @property
    def area(self) -> float:
        """Zero for an empty or inverted box, so such a prediction can only score 0."""
        return max(0.0, self.right - self.left) * max(0.0, self.bottom - self.top)


def iou(a: Box, b: Box) -> float:
    """Intersection over union; 0 where the union is empty."""
    width = min(a.right, b.right) - max(a.left, b.left)
    height = min(a.bottom, b.bottom) - max(a.top, b.top)
    intersection = max(0.0, width) * max(0.0, height)
    union = a.area + b.area - intersection
    return intersection / union if union > 0 else 0.0


def iou_summary(ious: list[float]) -> dict[str, float]:
    """Toloka's reported figures: mean IoU x100 and the shares above 0.5 and 0.7."""
    if not ious:
        raise ValueError("no IoU values")
    return {
        "iou": 100.0 * sum(ious) / len(ious),
        "iou_gt_50": sum(value > 0.5 for value in ious) / len(ious),
        "iou_gt_70": sum(value > 0.7 for value in ious) / len(ious),
    }
