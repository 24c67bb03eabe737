"""The other official metrics as pure functions, on hand-worked cases."""

from __future__ import annotations

import math

import pytest

from mmrag.evaluation.metrics.anls import (
    anls_score,
    exact_match,
    levenshtein,
    normalized_levenshtein,
)
from mmrag.evaluation.metrics.aokvqa import direct_answer_score, multiple_choice_correct
from mmrag.evaluation.metrics.choice import choice_correct
from mmrag.evaluation.metrics.fluency import fluency_scores, light_normalize
from mmrag.evaluation.metrics.iou import Box, iou, iou_summary
from mmrag.evaluation.metrics.rationale import corpus_bleu, mean_meteor, meteor
from mmrag.evaluation.metrics.retrieval import source_f1


def test_source_f1() -> None:
    # 1 hit; P = 1/2, R = 1/3 -> F1 = 2 * (1/6) / (5/6) = 0.4
    assert source_f1(["a", "b"], ["b", "c", "d"]) == pytest.approx(0.4)
    assert source_f1(["b", "b", "c"], ["b", "c"]) == 1.0  # duplicates count once
    assert source_f1([], ["b"]) == 0.0
    assert source_f1(["x"], ["b"]) == 0.0
    with pytest.raises(ValueError, match="without gold sources"):
        source_f1(["a"], [])


def test_levenshtein_and_anls() -> None:
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein("", "abc") == 3
    assert normalized_levenshtein("", "") == 0.0
    assert anls_score("hallo", ["hello"]) == pytest.approx(0.8)  # NL = 1/5
    assert anls_score("  HeLLo ", ["hello"]) == 1.0  # lower-cased and stripped
    assert anls_score("ac", ["ab"]) == 0.0  # NL = 0.5 is not below tau
    assert anls_score("abcx", ["abcd", "zzzz"]) == pytest.approx(0.75)  # best answer wins
    assert anls_score("xyz", []) == 0.0
    assert exact_match(" Coca Cola", ["coca cola", "coke"]) == 1.0
    assert exact_match("coca-cola", ["coca cola"]) == 0.0


def test_iou_and_summary() -> None:
    assert iou(Box(0, 0, 10, 10), Box(5, 0, 15, 10)) == pytest.approx(50 / 150)
    assert iou(Box(0, 0, 10, 10), Box(0, 0, 10, 10)) == 1.0
    assert iou(Box(0, 0, 10, 10), Box(20, 20, 30, 30)) == 0.0
    assert iou(Box(5, 5, 5, 5), Box(5, 5, 5, 5)) == 0.0  # zero union
    assert iou(Box(0, 0, 10, 10), Box(10, 10, 0, 0)) == 0.0  # inverted prediction
    summary = iou_summary([1.0, 0.6, 0.5, 0.0])
    assert summary == {"iou": pytest.approx(52.5), "iou_gt_50": 0.5, "iou_gt_70": 0.25}


def test_aokvqa_exact_string_semantics() -> None:
    choices = ["red", "blue", "green", "black"]
    assert multiple_choice_correct("blue", choices, 1) == 1.0
    assert multiple_choice_correct("Blue", choices, 1) == 0.0  # no normalisation
    answers = ["dog"] * 2 + ["puppy"] * 4 + ["cat"] * 4
    assert direct_answer_score("dog", answers) == pytest.approx(2 / 3)
    assert direct_answer_score("puppy", answers) == 1.0  # capped at 1
    assert direct_answer_score("dogs", answers) == 0.0


def test_choice_accuracy() -> None:
    assert choice_correct(2, 2) == 1.0
    assert choice_correct(1, 2) == 0.0
    assert choice_correct(None, 0) == 0.0


def test_meteor_exact_and_stem_matching_without_synonyms() -> None:
    # 4 exact matches in one chunk: Fmean 1, penalty 0.5 * (1/4)^3
    assert meteor("the cat sat down", ["the cat sat down"]) == pytest.approx(1 - 0.5 / 64)
    # Porter stems match (cats/cat, running/runs): 2 matches, 1 chunk -> 1 - 0.5 * (1/2)^3
    assert meteor("cats running", ["cat runs"]) == pytest.approx(0.9375)
    # no synonym stage: big/large do not match; 1 match of 2: P = R = 1/2,
    # Fmean = PR / (0.9 P + 0.1 R) = 1/2, penalty 0.5 * 1^3 -> 0.25
    assert meteor("big house", ["large house"]) == pytest.approx(0.25)
    # best reference is taken
    assert meteor("big house", ["nothing here", "big house"]) > 0.8
    assert mean_meteor(["big house", "cats running"], [["large house"], ["cat runs"]]) == (
        pytest.approx((0.25 + 0.9375) / 2)
    )


def test_corpus_bleu() -> None:
    sentence = "the cat sat on the mat with a hat"
    assert corpus_bleu([sentence], [[sentence]]) == pytest.approx(100.0)
    assert corpus_bleu(["nothing in common at all"], [[sentence]]) == pytest.approx(0.0)
    # variable reference counts are accepted
    score = corpus_bleu([sentence, sentence], [[sentence, "x y z"], [sentence]])
    assert score == pytest.approx(100.0)


def test_light_normalize() -> None:
    assert light_normalize("  The door, red!  ok ") == "The door red ok"


def _fake_log_likelihood(pairs):
    """ll(source, target) = -0.1 - |len(source) - len(target)| / 10, per character."""
    return [-0.1 - abs(len(s) - len(t)) / 10 for s, t in pairs]


def test_fluency_formula_with_a_fake_model() -> None:
    calls = []

    def spy(pairs):
        calls.append(list(pairs))
        return _fake_log_likelihood(pairs)

    scores = fluency_scores(
        ["ab", "abcd!", "xy", "q"],
        [["abcd"], ["abcd"], ["abcd", "xz"], []],
        spy,
    )
    # ll(r, c) - ll(r, r) = -|4 - 2| / 10 -> FL = exp(-0.2)
    assert scores[0] == pytest.approx(math.exp(-0.2))
    # "abcd!" normalises to "abcd" == the reference: exactly 1
    assert scores[1] == 1.0
    # best reference: "xz" has the same length as "xy" -> ratio 1
    assert scores[2] == 1.0
    assert scores[3] is None  # no reference
    assert len(calls) == 1  # one batched call
    assert len(calls[0]) == len(set(calls[0]))  # each distinct pair scored once


def test_fluency_is_capped_at_one() -> None:
    def generous(pairs):
        return [0.0 if s != t else -5.0 for s, t in pairs]

    assert fluency_scores(["other answer"], [["reference"]], generous) == [1.0]
