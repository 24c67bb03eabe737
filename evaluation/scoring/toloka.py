"""Toloka VQA: IoU of the predicted box with the gold box, joined on `image`."""

from __future__ import annotations

from collections.abc import Mapping

from mmrag.evaluation.loaders.toloka import TolokaItem
from mmrag.evaluation.metrics.iou import Box, iou, iou_summary
from mmrag.evaluation.scoring import ScoreReport, join


def score(
    gold: Mapping[str, TolokaItem],
    predictions: Mapping[str, Box],
    *,
    pred_label: str = "predictions",
) -> ScoreReport:
    """Mean IoU x100 and shares above 0.5 / 0.7; a gold image without a prediction scores 0."""
    warnings: list[str] = []
    images = list(gold)
    matched = join(images, predictions, pred_label=pred_label, warnings=warnings, what="image")
    ious = [
        iou(gold[image].box, box) if box is not None else 0.0
        for image, box in zip(images, matched, strict=True)
    ]
    return ScoreReport(dict(iou_summary(ious)), warnings)
