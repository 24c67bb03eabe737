"""`mmrag eval score` as a user runs it: JSON on stdout, one-line errors on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import assert_one_line_error, run_mmrag

FIXTURES = Path(__file__).parent / "fixtures"
TOLOKA_GOLD = str(FIXTURES / "toloka" / "train_sample.csv")


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    paths = {
        "broken": tmp_path / "broken.json",
        "list": tmp_path / "list.json",
        "wrong_record": tmp_path / "wrong_record.json",
        "aok_gold": tmp_path / "aokvqa_v1p0_val.json",
        "aok_pred": tmp_path / "aok_pred.json",
        "stvqa_gold": tmp_path / "stvqa.json",
        "stvqa_dict": tmp_path / "stvqa_dict.json",
        "nomatch": tmp_path / "nomatch.csv",
    }
    paths["broken"].write_text('{"q1": {"sources": [1], "answer": "x"')
    paths["list"].write_text(json.dumps([{"question_id": "q1", "answer": "red"}]))
    paths["wrong_record"].write_text(json.dumps({"q1": "red"}))
    paths["aok_gold"].write_text(
        json.dumps(
            [
                {
                    "question_id": "a1",
                    "image_id": 1,
                    "question": "?",
                    "choices": ["x", "y", "z", "w"],
                    "correct_choice_idx": 1,
                    "direct_answers": ["y"] * 10,
                    "difficult_direct_answer": False,
                    "rationales": ["r"],
                }
            ]
        )
    )
    paths["aok_pred"].write_text(json.dumps({"a1": {"multiple_choice": "y", "direct_answer": "z"}}))
    paths["stvqa_gold"].write_text(
        json.dumps({"data": [{"question_id": 5, "answers": ["coke"], "file_path": "i.jpg"}]})
    )
    paths["stvqa_dict"].write_text(json.dumps({"5": "coke"}))
    paths["nomatch"].write_text("image,left,top,right,bottom\nother.jpg,1,2,3,4\n")
    return {name: str(path) for name, path in paths.items()}


def test_aokvqa_and_stvqa_print_their_keys(files: dict[str, str], tmp_path: Path) -> None:
    result = run_mmrag(
        "eval", "score", "aokvqa", "--gold", files["aok_gold"], "--pred", files["aok_pred"]
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"mc": 100.0, "da": 0.0, "bleu": None, "meteor": None}
    pred = tmp_path / "st_pred.json"
    pred.write_text(json.dumps([{"question_id": 5, "answer": "Coke"}]))
    result = run_mmrag("eval", "score", "stvqa", "--gold", files["stvqa_gold"], "--pred", str(pred))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"anls": 1.0, "accuracy": 1.0}


def test_help_lists_eval() -> None:
    result = run_mmrag("eval", "score", "--help")
    assert result.returncode == 0
    for option in ("--gold", "--pred", "--baseline-tsv", "--no-fl", "--fl-model"):
        assert option in result.stdout


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["imagenet", "--gold", "g", "--pred", "p"], ["invalid choice: 'imagenet'"]),
        (["webqa", "--gold", "missing.json", "--pred", "{list}"], ["missing.json", "no such file"]),
        (["toloka", "--gold", TOLOKA_GOLD, "--pred", "nope.csv"], ["nope.csv", "no such file"]),
        (["aokvqa", "--gold", "{aok_gold}", "--pred", "{broken}"], ["broken.json", "malformed"]),
        (["webqa", "--gold", "{aok_gold}", "--pred", "{list}"], ["aokvqa_v1p0_val.json"]),
        (["webqa", "--baseline-tsv", "{aok_gold}", "--no-fl"], ["not a WebQA baseline TSV"]),
        (["aokvqa", "--gold", "{aok_gold}", "--pred", "{list}"], ["not an A-OKVQA prediction"]),
        (["aokvqa", "--gold", "{aok_gold}", "--pred", "{wrong_record}"], ["prediction q1"]),
        (["stvqa", "--gold", "{stvqa_gold}", "--pred", "{stvqa_dict}"], ["not an ST-VQA pred"]),
        (["vlqa", "--gold", "{aok_gold}", "--pred", "{list}"], ["not a VLQA prediction file"]),
        (["toloka", "--gold", TOLOKA_GOLD, "--pred", "{nomatch}"], ["none of its 1 predictions"]),
        (["toloka", "--gold", TOLOKA_GOLD], ["needs --gold FILE and --pred FILE"]),
        (["toloka", "--baseline-tsv", TOLOKA_GOLD], ["--baseline-tsv is only for webqa"]),
        (
            ["webqa", "--baseline-tsv", "x.tsv", "--gold", "{aok_gold}"],
            ["either --baseline-tsv or --gold and --pred"],
        ),
        (
            [
                "webqa",
                "--baseline-tsv",
                str(FIXTURES / "webqa" / "README.md"),
                "--fl-model",
                "./no/such/model",
            ],
            ["not a WebQA baseline TSV"],
        ),
    ],
)
def test_bad_input_is_one_line(files: dict[str, str], args: list[str], fragments) -> None:
    result = run_mmrag("eval", "score", *[arg.format(**files) for arg in args])
    assert_one_line_error(result, *fragments)


def test_fl_model_that_does_not_exist_is_one_line(tmp_path: Path) -> None:
    tsv = tmp_path / "b.tsv"
    tsv.write_text(
        "Guid\tQcate\tQ\tA\tKeywords_A\tOutput_conf\tOutput\n"
        'g1\tcolor\tq?\t["The door is red."]\tred\t"[-1]"\t["Red door."]\n'
    )
    result = run_mmrag(
        "eval", "score", "webqa", "--baseline-tsv", str(tsv), "--fl-model", str(tmp_path / "no/m")
    )
    assert_one_line_error(result, "FL model", "no such directory")


def test_default_fl_model_offline_fails_fast_in_one_line(monkeypatch, tmp_path: Path) -> None:
    """No hub here: the default hub name must fail at once (not after a minute of retries)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    tsv = FIXTURES / "webqa" / "vlp_x101fpn_val_img_queries.tsv"
    result = run_mmrag("eval", "score", "webqa", "--baseline-tsv", str(tsv))
    assert_one_line_error(result, "facebook/bart-large-cnn", "--no-fl")
