"""Benchmark loaders: tolerant of known quirks, strict (file + record named) about corruption."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmrag.evaluation.errors import DatasetError
from mmrag.evaluation.loaders import aokvqa, stvqa, toloka, vlqa, webqa
from mmrag.indexes.errors import InputError

FIXTURES = Path(__file__).parent / "fixtures"


def write(path: Path, data) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_dataset_error_is_an_input_error() -> None:
    assert issubclass(DatasetError, InputError)


# --- WebQA ---------------------------------------------------------------------------------


def test_webqa_gold_reuses_the_corpus_reader_and_filters_split(tiny_webqa) -> None:
    questions = webqa.load_gold(tiny_webqa["json"])
    assert [q.guid for q in questions] == ["q1", "q2"]
    assert questions[0].question == "What color is the door of the Harbor Inn?"  # quotes gone
    assert questions[0].gold_source_ids == ["30000000"]
    assert questions[0].keywords == "red" and questions[1].keywords is None
    with pytest.raises(DatasetError, match="no WebQA questions of split 'train'"):
        webqa.load_gold(tiny_webqa["json"], split="train")


def test_webqa_gold_errors_name_the_file(tmp_path: Path) -> None:
    bad = write(tmp_path / "bad.json", '{"q1": {"Q": "x", "img_posFacts": 3}}')
    with pytest.raises(DatasetError, match=r"bad\.json: question q1: img_posFacts is not a list"):
        webqa.load_gold(bad)
    broken = write(tmp_path / "broken.json", '{"q1": {"Q": ')
    with pytest.raises(DatasetError, match=r"broken\.json: malformed JSON"):
        webqa.load_gold(broken)
    listed = write(tmp_path / "list.json", [{"Q": "x"}])
    with pytest.raises(DatasetError, match="keyed by question guid"):
        webqa.load_gold(listed)
    with pytest.raises(DatasetError, match="no such file"):
        webqa.load_gold(tmp_path / "missing.json")


def test_webqa_predictions(tmp_path: Path) -> None:
    path = write(
        tmp_path / "p.json",
        {
            "q1": {"sources": [30000000, "s-1", 7.0], "answer": "Red."},
            "q2": {"sources": [], "answer": ["It was built in 1887."]},
        },
    )
    predictions = webqa.load_predictions(path)
    assert predictions["q1"].sources == ("30000000", "s-1", "7")
    assert predictions["q2"].answer == "It was built in 1887."
    for bad, message in [
        ([{"question_id": 1, "answer": "x"}], "not a WebQA prediction file"),
        ({"q1": "red"}, r"prediction q1: expected an object with 'sources' and 'answer'"),
        ({"q1": {"sources": "30000000", "answer": "x"}}, "'sources' is not a list"),
        ({"q1": {"sources": [True], "answer": "x"}}, "bad source id"),
        ({"q1": {"sources": [], "answer": 3}}, "'answer' is not a string"),
        ({}, "no predictions"),
    ]:
        with pytest.raises(DatasetError, match=message):
            webqa.load_predictions(write(tmp_path / "bad.json", bad))


def test_webqa_baseline_tsv_fixture() -> None:
    questions, predictions = webqa.load_baseline_tsv(
        FIXTURES / "webqa" / "vlp_x101fpn_val_img_queries.tsv"
    )
    assert len(questions) == len(predictions) == 2511
    first = questions[0]
    assert first.guid == "d5bbc7c80dba11ecb1e81171463288e9"
    assert first.qcate == "YesNo" and first.keywords == "No"
    assert first.answers[0].startswith("No, a Minnetonka Rhododendron")
    assert predictions[first.guid].answer.startswith("Yes , the Minnetonka")
    assert predictions[first.guid].sources is None


def test_webqa_baseline_tsv_corruption(tmp_path: Path) -> None:
    header = "Guid\tQcate\tQ\tA\tKeywords_A\tOutput_conf\tOutput\n"
    good = 'g1\tcolor\tq?\t["The door is red."]\tred\t"[-1]"\t["Red door."]\n'
    assert webqa.load_baseline_tsv(write(tmp_path / "ok.tsv", header + good))[0][0].guid == "g1"
    cases = [
        (header + "g1\tcolor\tq?\n", r"line 2: 3 tab-separated fields"),
        (header + good.replace('["Red door."]', "[]"), "line 2: column Output"),
        (header + good.replace('["The door', '["The door"'), "line 2: column A is not valid JSON"),
        (header + good + good, "line 3: guid g1 appears twice"),
        ("Guid\tQ\n", "header lacks Qcate, A, Keywords_A, Output"),
        ("", "no rows"),
    ]
    for text, message in cases:
        with pytest.raises(DatasetError, match=message):
            webqa.load_baseline_tsv(write(tmp_path / "bad.tsv", text))


# --- A-OKVQA -------------------------------------------------------------------------------

AOK_ITEM = {
    "split": "val",
    "image_id": 461751,
    "question_id": "22jbM6gDxdaMaunuzgrsBB",
    "question": "What is in the motorcyclist's mouth?",
    "choices": ["toothpick", "food", "popsicle stick", "cigarette"],
    "correct_choice_idx": 3,
    "direct_answers": ["cigarette"] * 10,
    "difficult_direct_answer": False,
    "rationales": ["He's smoking while riding."],
}


def test_aokvqa_gold_and_image_path(tmp_path: Path) -> None:
    items = aokvqa.load_gold(write(tmp_path / "aokvqa_v1p0_val.json", [AOK_ITEM]))
    assert items[0].correct_choice_idx == 3 and items[0].direct_answers[0] == "cigarette"
    assert items[0].image_path("/coco") == Path("/coco/val2017/000000461751.jpg")
    test_item = {
        k: v for k, v in AOK_ITEM.items() if k not in ("correct_choice_idx", "direct_answers")
    }
    loaded = aokvqa.load_gold(write(tmp_path / "aokvqa_v1p0_test.json", [test_item]))
    assert loaded[0].correct_choice_idx is None and loaded[0].direct_answers is None
    bad = dict(AOK_ITEM, correct_choice_idx=7)
    with pytest.raises(DatasetError, match=r"item 0 \(question_id 22jbM6gDxdaMaunuzgrsBB\).*7"):
        aokvqa.load_gold(write(tmp_path / "bad.json", [bad]))
    with pytest.raises(DatasetError, match="expected a JSON list"):
        aokvqa.load_gold(write(tmp_path / "bad.json", {"a": AOK_ITEM}))


def test_aokvqa_predictions(tmp_path: Path) -> None:
    path = write(tmp_path / "p.json", {"q": {"direct_answer": "cigarette", "rationales": ["r"]}})
    prediction = aokvqa.load_predictions(path)["q"]
    assert (prediction.multiple_choice, prediction.direct_answer) == (None, "cigarette")
    assert prediction.rationale == "r"
    with pytest.raises(DatasetError, match="prediction q: expected an object"):
        aokvqa.load_predictions(write(tmp_path / "bad.json", {"q": "cigarette"}))
    with pytest.raises(DatasetError, match="'multiple_choice' is not a string"):
        aokvqa.load_predictions(write(tmp_path / "bad.json", {"q": {"multiple_choice": 3}}))


# --- ST-VQA --------------------------------------------------------------------------------


def test_stvqa_image_field_tolerance_and_predictions(tmp_path: Path) -> None:
    data = {
        "data": [
            {"question_id": 1, "question": "q", "answers": ["coke"], "file_path": "a/1.jpg"},
            {"question_id": 2, "question": "q", "answers": "stop", "file_name": "a/2.jpg"},
            {"question_id": 3, "question": "q", "image": "a/3.jpg"},
        ]
    }
    items = stvqa.load_gold(write(tmp_path / "g.json", data))
    assert [i.image for i in items] == ["a/1.jpg", "a/2.jpg", "a/3.jpg"]
    assert items[1].answers == ("stop",) and items[2].answers is None
    assert items[0].question_id == "1"
    bad = {"data": [{"question_id": 9, "answers": ["x"]}]}
    with pytest.raises(DatasetError, match=r"data\[0\] \(question_id 9\): no image path"):
        stvqa.load_gold(write(tmp_path / "bad.json", bad))
    with pytest.raises(DatasetError, match="with a 'data' list"):
        stvqa.load_gold(write(tmp_path / "bad.json", data["data"]))
    predictions = stvqa.load_predictions(
        write(tmp_path / "p.json", [{"question_id": 1, "answer": "coke"}])
    )
    assert predictions == {"1": "coke"}
    for bad_pred, message in [
        ({"1": "coke"}, "not an ST-VQA prediction file"),
        ([{"question_id": 1}], "item 0: expected"),
        ([{"question_id": 1, "answer": "a"}, {"question_id": "1", "answer": "b"}], "twice"),
    ]:
        with pytest.raises(DatasetError, match=message):
            stvqa.load_predictions(write(tmp_path / "bad.json", bad_pred))


# --- Toloka --------------------------------------------------------------------------------

TOLOKA_HEADER = "image,width,height,left,top,right,bottom,question\n"


def test_toloka_fixture_and_corruption(tmp_path: Path) -> None:
    gold = toloka.load_gold(FIXTURES / "toloka" / "train_sample.csv")
    assert len(gold) == 1000
    first = gold["https://toloka-cdn.azureedge.net/wsdmcup2023/000000001093.jpg"]
    assert tuple(first.box) == (409, 172, 432, 206) and first.width == 500
    predictions = toloka.load_predictions(
        write(tmp_path / "p.csv", "image,left,top,right,bottom\nx.jpg,1,2,3,4\n")
    )
    assert tuple(predictions["x.jpg"]) == (1, 2, 3, 4)
    cases = [
        (TOLOKA_HEADER + "x.jpg,10,10,1,2,abc,4,q\n", r"line 2 \(x\.jpg\): bad number"),
        (TOLOKA_HEADER + "x.jpg,10,10,1,2,nan,4,q\n", "not a finite number"),
        (TOLOKA_HEADER + "x.jpg,10,10,5,2,1,4,q\n", "right<left"),
        (TOLOKA_HEADER + "x.jpg,10,10,1,2\n", "line 2: wrong number of fields"),
        (TOLOKA_HEADER + "x.jpg,1,1,0,0,1,1,q\nx.jpg,1,1,0,0,1,1,q\n", "line 3: image x.jpg"),
        ("image,left\nx.jpg,1\n", "missing columns top, right, bottom"),
    ]
    for text, message in cases:
        with pytest.raises(DatasetError, match=message):
            toloka.load_gold(write(tmp_path / "bad.csv", text))


# --- VLQA ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "records",
    [
        [
            {
                "qid": "v1",
                "image": "i.png",
                "passage": "p",
                "question": "q",
                "answer_choices": ["a", "b"],
                "answer": 1,
            }
        ],
        {
            "data": [
                {
                    "question_id": "v1",
                    "image_path": "i.png",
                    "text": "p",
                    "query": "q",
                    "choices": ["a", "b"],
                    "label": "1",
                }
            ]
        },
        {
            "v1": {
                "img": "i.png",
                "context": "p",
                "question": "q",
                "options": ["a", "b"],
                "correct_answer": "b",
            }
        },
        [
            {
                "id": "v1",
                "images": ["i0.png", "i1.png"],
                "passage": "p",
                "question": "q",
                "answer_choices": ["a", "b"],
                "answer": "B",
            }
        ],
    ],
)
def test_vlqa_field_mapping_is_tolerant(tmp_path: Path, records) -> None:
    items = vlqa.load_gold(write(tmp_path / "v.json", records))
    assert len(items) == 1
    assert items[0].question_id == "v1" and items[0].answer == 1 and items[0].choices == ("a", "b")


def test_vlqa_jsonl_predictions_and_corruption(tmp_path: Path) -> None:
    lines = "\n".join(
        json.dumps(
            {"qid": f"v{i}", "question": "q", "answer_choices": ["a", "b", "c"], "answer": i}
        )
        for i in range(3)
    )
    assert [i.answer for i in vlqa.load_gold(write(tmp_path / "v.jsonl", lines))] == [0, 1, 2]
    with pytest.raises(DatasetError, match=r"item 0: answer index 5 is outside the 2 choices"):
        vlqa.load_gold(write(tmp_path / "b.json", [{"qid": 1, "choices": ["a", "b"], "answer": 5}]))
    with pytest.raises(DatasetError, match=r"item 0: no answer choices"):
        vlqa.load_gold(write(tmp_path / "b.json", [{"qid": 1, "answer": 0}]))
    with pytest.raises(DatasetError, match="malformed JSON Lines at line 2"):
        vlqa.load_gold(write(tmp_path / "b.jsonl", '{"qid": 1}\n{"qid": \n'))
    assert vlqa.load_predictions(write(tmp_path / "p.json", {"v1": 1, "v2": "0"})) == {
        "v1": 1,
        "v2": 0,
    }
    with pytest.raises(DatasetError, match=r"prediction v1: 'b' is not an answer index"):
        vlqa.load_predictions(write(tmp_path / "p.json", {"v1": "b"}))


def test_webqa_gold_drops_distractors_unless_asked(tiny_webqa) -> None:
    assert webqa.load_gold(tiny_webqa["json"])[0].neg_sources == []
    kept = webqa.load_gold(tiny_webqa["json"], with_negatives=True)[0].neg_sources
    assert {source.id for source in kept} == {"30000002", "s-shared"}
