"""The published figures, reproduced through the real `mmrag eval score` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import run_mmrag

FIXTURES = Path(__file__).parent / "fixtures"


def test_webqa_baseline_tsv_reproduces_published_accuracy() -> None:
    result = run_mmrag(
        "eval",
        "score",
        "webqa",
        "--baseline-tsv",
        str(FIXTURES / "webqa" / "vlp_x101fpn_val_img_queries.tsv"),
        "--no-fl",
    )
    assert result.returncode == 0, result.stderr
    metrics = json.loads(result.stdout)
    # WebQA baseline release, VLP + x101fpn, "Oracle sources", image queries: Acc 0.4429
    assert metrics["acc"] == pytest.approx(0.4429, abs=0.005)
    assert metrics["retrieval_f1"] is None  # the TSV has no sources
    assert metrics["fl"] is None and metrics["fl_x_acc"] is None
    by_qcate = metrics["by_qcate"]
    assert sum(entry["n"] for entry in by_qcate.values()) == 2511
    assert set(by_qcate) == {"YesNo", "Others", "choose", "number", "color", "shape"}
    weighted = sum(entry["n"] * entry["acc"] for entry in by_qcate.values()) / 2511
    assert weighted == pytest.approx(metrics["acc"])


def test_toloka_crowd_baseline_reproduces_published_iou() -> None:
    result = run_mmrag(
        "eval",
        "score",
        "toloka",
        "--gold",
        str(FIXTURES / "toloka" / "train_sample.csv"),
        "--pred",
        str(FIXTURES / "toloka" / "train_sample_crowd_baseline.csv"),
    )
    assert result.returncode == 0, result.stderr
    metrics = json.loads(result.stdout)
    assert metrics["iou"] == pytest.approx(85.611, abs=0.001)
    assert metrics["iou_gt_50"] == pytest.approx(0.936)
    assert metrics["iou_gt_70"] == pytest.approx(0.888)
    assert set(metrics) == {"iou", "iou_gt_50", "iou_gt_70"}
