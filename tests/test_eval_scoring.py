"""Joining gold to predictions and aggregating, per benchmark, on hand-worked cases."""

from __future__ import annotations

import pytest

from mmrag.evaluation.errors import DatasetError
from mmrag.evaluation.loaders.aokvqa import AOKVQAItem, AOKVQAPrediction
from mmrag.evaluation.loaders.stvqa import STVQAItem
from mmrag.evaluation.loaders.toloka import TolokaItem
from mmrag.evaluation.loaders.vlqa import VLQAItem
from mmrag.evaluation.loaders.webqa import WebQAPrediction
from mmrag.evaluation.metrics.iou import Box
from mmrag.evaluation.scoring import aokvqa, stvqa, toloka, vlqa, webqa
from mmrag.indexes.corpus.webqa import WebQAQuestion
from mmrag.indexes.sources import Source


def aok(qid: str, correct: int, answers: list[str], difficult: bool = False) -> AOKVQAItem:
    return AOKVQAItem(
        question_id=qid,
        image_id=1,
        question="?",
        choices=("a", "b", "c", "d"),
        correct_choice_idx=correct,
        direct_answers=tuple(answers),
        difficult_direct_answer=difficult,
        rationales=("the cat sat on the mat",),
    )


def test_aokvqa_difficult_excluded_from_da_and_missing_scores_zero() -> None:
    items = [
        aok("1", 0, ["a"] * 10),
        aok("2", 1, ["b"] * 2 + ["c"] * 8),
        aok("3", 2, ["c"] * 10, difficult=True),
        aok("4", 3, ["d"] * 10),
    ]
    predictions = {
        "1": AOKVQAPrediction("a", "a"),  # MC right, DA 1
        "2": AOKVQAPrediction("a", "b"),  # MC wrong, DA 2/3
        "3": AOKVQAPrediction("c", "x"),  # MC right, DA excluded (difficult)
    }  # "4" missing: 0 in both
    report = aokvqa.score(items, predictions)
    assert report.metrics["mc"] == pytest.approx(100 * 2 / 4)
    assert report.metrics["da"] == pytest.approx(100 * (1 + 2 / 3 + 0) / 3)
    assert report.metrics["bleu"] is None and report.metrics["meteor"] is None
    assert any("1 of 4 gold questions have no prediction" in w for w in report.warnings)


def test_aokvqa_task_without_predictions_is_null_and_rationales_are_scored() -> None:
    items = [aok("1", 0, ["a"] * 10)]
    report = aokvqa.score(
        items, {"1": AOKVQAPrediction(direct_answer="a", rationale="the cat sat on the mat")}
    )
    assert report.metrics["mc"] is None
    assert report.metrics["da"] == 100.0
    assert report.metrics["bleu"] == pytest.approx(100.0)
    assert report.metrics["meteor"] == pytest.approx(1 - 0.5 / 6**3)


def test_aokvqa_refuses_gold_without_answers() -> None:
    item = AOKVQAItem("1", 1, "?", ("a", "b"), None, None, False, ())
    with pytest.raises(DatasetError, match="test split cannot be scored"):
        aokvqa.score([item], {"1": AOKVQAPrediction("a", "a")})


def test_predictions_matching_nothing_are_refused() -> None:
    with pytest.raises(DatasetError, match="none of its 1 predictions matches a gold question"):
        aokvqa.score([aok("1", 0, ["a"])], {"other": AOKVQAPrediction("a", "a")})


def test_stvqa_scores() -> None:
    items = [
        STVQAItem("1", "?", ("hello",), "i.jpg"),
        STVQAItem("2", "?", ("stop",), "i.jpg"),
        STVQAItem("3", "?", None, "i.jpg"),  # no answers: skipped
    ]
    report = stvqa.score(items, {"1": "hallo", "2": "STOP ", "3": "x"})
    assert report.metrics == {
        "anls": pytest.approx((0.8 + 1.0) / 2),
        "accuracy": pytest.approx(0.5),
    }
    assert any("1 questions without answers" in w for w in report.warnings)


def test_toloka_missing_prediction_scores_zero() -> None:
    gold = {
        "a.jpg": TolokaItem("a.jpg", Box(0, 0, 10, 10)),
        "b.jpg": TolokaItem("b.jpg", Box(0, 0, 10, 10)),
    }
    report = toloka.score(gold, {"a.jpg": Box(0, 0, 10, 10)})
    assert report.metrics == {"iou": 50.0, "iou_gt_50": 0.5, "iou_gt_70": 0.5}


def test_vlqa_accuracy() -> None:
    items = [VLQAItem(str(i), "i.png", "p", "q", ("a", "b"), i % 2) for i in range(4)]
    report = vlqa.score(items, {"0": 0, "1": 0, "2": 0})  # right, wrong, right, missing
    assert report.metrics == {"accuracy": 0.5}


def question(guid: str, qcate: str, keywords: str | None, gold: list[str]) -> WebQAQuestion:
    return WebQAQuestion(
        guid=guid,
        question="?",
        answers=["The door is red."],
        keywords=keywords,
        qcate=qcate,
        split="val",
        topic="",
        pos_sources=[Source(id=s, modality="text", title="", text="") for s in gold],
    )


def test_webqa_aggregates_without_fl() -> None:
    questions = [
        question("q1", "color", "red", ["s1"]),
        question("q2", "text", "lighthouse 1887", ["s2", "s3"]),
        question("q3", "text", None, ["s4"]),  # no keywords: out of the Acc mean
    ]
    predictions = {
        "q1": WebQAPrediction("The door is red.", ("s1", "x")),  # F1 2/3, Acc 2/(2+1e-5)
        "q2": WebQAPrediction("It dates from 1887.", ("s3",)),  # F1 2/3, Acc 1/2
        "q3": WebQAPrediction("Whatever.", ()),  # F1 0
    }
    report = webqa.score(questions, predictions, fl=None)
    metrics = report.metrics
    assert metrics["retrieval_f1"] == pytest.approx((2 / 3 + 2 / 3 + 0) / 3)
    assert metrics["acc"] == pytest.approx((2 / (2 + 1e-5) + 0.5) / 2)
    assert metrics["fl"] is None and metrics["fl_x_acc"] is None
    assert metrics["by_qcate"]["text"]["n"] == 2
    assert metrics["by_qcate"]["text"]["acc"] == pytest.approx(0.5)
    assert metrics["by_qcate"]["color"]["retrieval_f1"] == pytest.approx(2 / 3)
    assert any("1 questions have no Keywords_A" in w for w in report.warnings)


def test_webqa_fl_uses_the_injected_model_and_missing_answers_score_zero() -> None:
    questions = [question("q1", "color", "red", ["s1"]), question("q2", "color", "red", ["s1"])]
    seen = []

    def fake(pairs):
        seen.extend(pairs)
        return [0.0 if target == "The door is red" else -1.0 for _, target in pairs]

    report = webqa.score(questions, {"q1": WebQAPrediction("The door is red!", ("s1",))}, fl=fake)
    assert report.metrics["fl"] == pytest.approx(0.5)  # q1: 1.0, q2 (missing): 0
    assert report.metrics["fl_x_acc"] == pytest.approx(2 / (2 + 1e-5) / 2)
    assert seen == [("The door is red", "The door is red")]
