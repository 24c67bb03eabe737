"""WebQA keyword accuracy: the official normalisation and per-Qcate rules, worked by hand."""

from __future__ import annotations

import pytest

from mmrag.evaluation.metrics.webqa_acc import (
    COLOR_SET,
    SHAPE_SET,
    keyword_accuracies,
    keyword_accuracy,
    normalize_text,
)

PERFECT_F1 = 2 / (2 + 1e-5)  # the official F1 has +1e-5 in its denominator


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Red Door.", "red door"),  # lower, trailing period dropped, article dropped
        ("an apple", "apple"),
        ("The", "the"),  # one word: articles stay
        ("A", "a"),  # one character: returned lower-cased, no other step
        ("?", "?"),  # one character keeps even punctuation
        ("Three cats", "3 cat"),  # number word -> digits, lemmas
        ("It is 3.5 meters.", "it be 3.5 meter"),  # decimal point kept, final period not
        ("two point five", "2 point 5"),  # 'point' is not turned into 0 by word2number
        ("Blue footprints.", "blue footprint"),
        ('"5"', "5"),
        ("No, it does not.", "no it do not"),
    ],
)
def test_normalize_text_follows_the_official_script(text: str, expected: str) -> None:
    assert normalize_text(text) == expected


def test_official_sets_are_the_leaderboard_lists_with_their_quirks() -> None:
    assert len(COLOR_SET) == 36 and len(SHAPE_SET) == 69
    assert {"yes", "spot", "bluere"} <= COLOR_SET
    assert {"h", "xs", "point", "octogon"} <= SHAPE_SET


@pytest.mark.parametrize(
    ("prediction", "keywords", "qcate", "expected"),
    [
        # colour: domain tokens {red, white} vs {red}: P=1/2, R=1
        ("The door is red and white.", "red", "color", 2 * 0.5 / (1.5 + 1e-5)),
        # a repeated colour counts once (set intersection), so this is a perfect match
        ("red red red", "red", "color", PERFECT_F1),
        ("The door is blue.", "red", "color", 0.0),
        ("It is a star.", "star", "shape", PERFECT_F1),
        ("No, it does not.", "No", "YesNo", PERFECT_F1),
        ("Yes, it does.", "No", "YesNo", 0.0),
        # number: integer tokens only; word numbers were turned into digits first
        ("There are three windows.", "3", "number", PERFECT_F1),
        ("two or 3", "3", "number", 2 * 0.5 / (1.5 + 1e-5)),
        ("There are 4 windows.", "3", "number", 0.0),
        # other categories: recall of keyword tokens
        ("It dates from 1887.", "lighthouse 1887", "text", 0.5),
        ("A fountain is in front.", "fountain and statue", "Others", 1 / 3),
        ("The left one.", "left", "choose", 1.0),
        ("Nothing matches here.", "fountain", "Others", 0.0),
    ],
)
def test_keyword_accuracy_by_category(
    prediction: str, keywords: str, qcate: str, expected: float
) -> None:
    assert keyword_accuracy(prediction, keywords, qcate) == pytest.approx(expected, abs=1e-12)


def test_batched_accuracies_equal_one_at_a_time() -> None:
    cases = [
        ("The door is red and white.", "red", "color"),
        ("There are three windows.", "3", "number"),
        ("It dates from 1887.", "lighthouse 1887", "text"),
    ]
    batched = keyword_accuracies(*map(list, zip(*cases, strict=True)))
    assert batched == [keyword_accuracy(*case) for case in cases]
    with pytest.raises(ValueError, match="differ in length"):
        keyword_accuracies(["a"], [], ["text"])
