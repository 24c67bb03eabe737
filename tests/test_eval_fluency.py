"""Fluency (BARTScore FL) with a tiny random BART loaded from a local directory, offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmrag.evaluation.errors import EvaluationError
from tests.fixtures.tiny_bart import build_tiny_bart
from tests.helpers import run_mmrag, text_fact


@pytest.fixture(scope="module")
def tiny_bart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_bart(tmp_path_factory.mktemp("bart") / "tiny-bart")


@pytest.fixture(scope="module")
def scorer(tiny_bart: Path):
    from mmrag.evaluation.metrics.fluency import BartLogLikelihood

    return BartLogLikelihood(tiny_bart, batch_size=3, device="cpu")


def test_fl_of_an_answer_against_itself_is_exactly_one(scorer) -> None:
    from mmrag.evaluation.metrics.fluency import fluency_scores

    answers = ["The door of the Harbor Inn is red.", "it was built in 1887", ""]
    assert fluency_scores(answers, [[a] for a in answers], scorer) == [1.0, 1.0, 1.0]


def test_fl_is_between_zero_and_one(scorer) -> None:
    from mmrag.evaluation.metrics.fluency import fluency_scores

    scores = fluency_scores(
        ["The door is blue.", "cat sat on the mat", "there are two windows"],
        [["The door is red."], ["the lighthouse was built in 1887", "a statue"], ["three"]],
        scorer,
    )
    assert all(score is not None and 0.0 <= score <= 1.0 for score in scores)
    assert len(set(scores)) > 1  # a random model still tells answers apart


def test_log_likelihood_matches_the_models_own_loss_and_ignores_padding(scorer) -> None:
    """Mean token log-likelihood == -(transformers' label loss) for an unpadded pair, and
    batching (padding) does not change a pair's score."""
    import torch

    pairs = [
        ("the door is red", "the door is blue"),
        ("a cat", "the cat sat on the mat and the statue"),
        ("there are two windows on the upper floor of the hotel", "two"),
    ]
    batched = scorer(pairs)
    one_by_one = [scorer([pair])[0] for pair in pairs]
    assert batched == pytest.approx(one_by_one, abs=1e-5)
    source, target = pairs[1]
    encoded = scorer.tokenizer([source], return_tensors="pt")
    labels = scorer.tokenizer([target], return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        loss = scorer.model(**encoded, labels=labels).loss.item()
    assert one_by_one[1] == pytest.approx(-loss, abs=1e-5)


def test_missing_local_model_is_an_input_error(tmp_path: Path) -> None:
    from mmrag.evaluation.metrics.fluency import BartLogLikelihood

    with pytest.raises(EvaluationError, match="no such directory"):
        BartLogLikelihood(str(tmp_path / "nope" / "model"))
    with pytest.raises(EvaluationError, match="cannot load FL model"):
        BartLogLikelihood(tmp_path)  # a directory without a model


def test_eval_score_webqa_end_to_end_with_tiny_bart(tiny_bart: Path, tmp_path: Path) -> None:
    def item(guid: str, qcate: str, keywords: str, answer: str, images: list, texts: list):
        return {
            "Guid": guid,
            "Q": '"A question?"',
            "A": [f'"{answer}"'],
            "Keywords_A": keywords,
            "Qcate": qcate,
            "split": "val",
            "topic": "t",
            "img_posFacts": [
                {"image_id": i, "title": "t", "caption": "c", "url": "", "imgUrl": ""}
                for i in images
            ],
            "img_negFacts": [],
            "txt_posFacts": [text_fact(s, "t", "f") for s in texts],
            "txt_negFacts": [],
        }

    gold = {
        "q1": item("q1", "color", "red", "The door of the Harbor Inn is red.", [30000000], []),
        "q2": item("q2", "number", "3", "There are three windows.", [], ["s1", "s2"]),
        "q3": item("q3", "text", "lighthouse 1887", "It was built in 1887.", [], ["s3"]),
        "q4": item("q4", "text", "statue", "A statue.", [], ["s4"]),
    }
    gold["q4"]["split"] = "train"
    predictions = {
        # sources: P 1/2, R 1 -> F1 2/3; colour {red} vs {red} -> 2/(2+1e-5)
        "q1": {"sources": [30000000, "s9"], "answer": "The door of the Harbor Inn is red."},
        # sources: P 1, R 1/2 -> F1 2/3; integers {2} vs {3} -> 0
        "q2": {"sources": ["s1"], "answer": "There are two windows."},
        # sources: no hit -> 0; keyword recall: 1887 of (lighthouse, 1887) -> 1/2
        "q3": {"sources": ["s1"], "answer": "It dates from 1887."},
    }
    gold_path, pred_path = tmp_path / "gold.json", tmp_path / "pred.json"
    gold_path.write_text(json.dumps(gold))
    pred_path.write_text(json.dumps(predictions))
    result = run_mmrag(
        "eval",
        "score",
        "webqa",
        "--gold",
        str(gold_path),
        "--pred",
        str(pred_path),
        "--split",
        "val",
        "--fl-model",
        str(tiny_bart),
    )
    assert result.returncode == 0, result.stderr
    metrics = json.loads(result.stdout)
    official = {"retrieval_f1", "fl", "acc", "fl_x_acc", "by_qcate"}
    attribution = {"citation_recall", "citation_precision", "decline_rate", "invented_rate"}
    assert set(metrics) == official | attribution
    assert metrics["retrieval_f1"] == pytest.approx((2 / 3 + 2 / 3 + 0) / 3)
    assert metrics["acc"] == pytest.approx((2 / (2 + 1e-5) + 0 + 0.5) / 3)
    assert 0.0 <= metrics["fl"] <= 1.0
    q1 = metrics["by_qcate"]["color"]
    assert q1["n"] == 1 and q1["fl"] == 1.0  # identical to its reference
    assert q1["fl_x_acc"] == pytest.approx(2 / (2 + 1e-5))
    assert metrics["by_qcate"]["number"]["fl_x_acc"] == 0.0
    assert set(metrics["by_qcate"]) == {"text", "number", "color"}  # q4 (train) filtered out
