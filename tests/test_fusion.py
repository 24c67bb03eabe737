"""Fusion and calibration arithmetic, worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from mmrag.indexes.errors import InputError
from mmrag.retrieval import fusion
from mmrag.retrieval.calibration import Calibration, fit_logistic


def lists(**named):
    return {
        k.replace("_", "/"): (np.array(rows), np.array(scores, dtype=float))
        for k, (rows, scores) in named.items()
    }


def test_rrf_sums_reciprocal_ranks():
    fused = fusion.rrf(lists(bm25_text=([1, 2], [9.0, 5.0]), text_text=([2, 3], [0.9, 0.8])))
    assert fused[1] == pytest.approx(1 / 61)
    assert fused[2] == pytest.approx(1 / 62 + 1 / 61)
    assert fused[3] == pytest.approx(1 / 62)
    assert [row for row, _ in fusion.ranked(fused, 3)] == [2, 1, 3]


def test_rrf_gives_an_image_the_vote_of_its_better_field_caption_or_ocr_text():
    fused = fusion.rrf(
        lists(
            text_image=([1, 2], [0.9, 0.8]),
            text_ocr=([2, 1], [0.7, 0.6]),  # the same images, found by the text in them
            text_text=([7], [0.9]),
        )
    )
    # Summing both fields would give 1 and 2 each 1/61 + 1/62 and bury the snippet 7.
    assert fused[1] == pytest.approx(1 / 61) and fused[2] == pytest.approx(1 / 61)
    assert fused[7] == pytest.approx(1 / 61)
    # Fields of different retrievers still add up.
    two = fusion.rrf(lists(text_ocr=([1], [0.7]), bm25_image=([1], [3.0])))
    assert two[1] == pytest.approx(2 / 61)


def test_raw_keeps_the_best_score_per_row():
    fused = fusion.raw(lists(bm25_image=([1, 2], [3.0, 1.0]), bm25_text=([3, 1], [2.0, 0.5])))
    assert fused == {1: 3.0, 2: 1.0, 3: 2.0}


def test_calibrated_fusion_is_a_noisy_or_of_probabilities():
    calibration = Calibration(curves={"clip/image": (10.0, -2.5), "bm25/text": (1.0, -5.0)})
    fused = fusion.calibrated(
        lists(clip_image=([7], [0.25]), bm25_text=([7, 8], [5.0, 3.0])), calibration
    )
    p_clip, p_bm25_7, p_bm25_8 = 0.5, 0.5, 1 / (1 + np.exp(2.0))
    assert fused[7] == pytest.approx(1 - (1 - p_clip) * (1 - p_bm25_7))
    assert fused[8] == pytest.approx(p_bm25_8)


def test_low_raw_image_scores_can_outrank_snippets_once_calibrated():
    """The WebQA failure: CLIP image similarities sit below text ones on the raw scale."""
    calibration = Calibration(curves={"clip/image": (40.0, -10.0), "text/text": (10.0, -8.0)})
    both = lists(clip_image=([1], [0.3]), text_text=([2], [0.6]))
    assert fusion.ranked(fusion.raw(both), 1)[0][0] == 2
    assert fusion.ranked(fusion.calibrated(both, calibration), 1)[0][0] == 1


def test_fit_logistic_recovers_a_known_curve():
    rng = np.random.default_rng(0)
    scores = rng.uniform(0, 20, 20_000)
    labels = rng.random(20_000) < 1 / (1 + np.exp(-(0.5 * scores - 6)))
    a, b = fit_logistic(scores, labels, l2=0.0)
    assert a == pytest.approx(0.5, rel=0.1) and b == pytest.approx(-6, rel=0.1)


def test_calibration_round_trip_and_missing_list(tmp_path):
    calibration = Calibration(curves={"bm25/text": (1.0, -2.0)}, questions=3, depth=20)
    calibration.save(tmp_path)
    loaded = Calibration.load(tmp_path)
    assert loaded.curves == calibration.curves and loaded.questions == 3
    assert Calibration.load(tmp_path / "elsewhere") is None
    with pytest.raises(InputError, match="no calibration for clip/image"):
        loaded.probability("clip/image", np.array([0.1]))
