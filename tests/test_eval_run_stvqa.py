"""`mmrag eval run stvqa` end to end: real PP-OCR on painted signs, the embedded SmolLM2, the
official submission, a report whose ANLS is the one `mmrag eval score stvqa` gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import assert_one_line_error, run_mmrag, sign_jpeg

SIGNS = {
    "shop.jpg": ("MAPLE BAKERY", "OPEN DAILY"),
    "bus.jpg": ("ROUTE 42", "AIRPORT"),
}
QUESTIONS = [
    (101, "What is the name of the bakery?", ["maple bakery"], "shop.jpg"),
    (102, "Where is the bus going?", ["airport"], "bus.jpg"),
    (103, "Which route is the bus?", ["42", "route 42"], "bus.jpg"),
]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("stvqa")
    (root / "imgs").mkdir()
    for name, lines in SIGNS.items():
        (root / "imgs" / name).write_bytes(sign_jpeg(*lines))
    data = [
        {"question_id": qid, "question": q, "answers": a, "file_path": f"imgs/{image}",
         "set_name": "test", "dataset": "signs"}
        for qid, q, a, image in QUESTIONS
    ]  # fmt: skip
    (root / "ST-VQA.json").write_text(json.dumps({"data": data}))
    return root


def test_run_writes_the_submission_and_a_report_scored_as_eval_score(release: Path):
    out = release / "runs" / "preds.json"
    result = run_mmrag(
        "eval", "run", "stvqa", "--data", str(release / "ST-VQA.json"), "--images",
        str(release), "--out", str(out), "--ocr-workers", "1", "--max-tokens", "24",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    submission = json.loads(out.read_text())
    assert [entry["question_id"] for entry in submission] == [101, 102, 103]  # ints, as released
    assert all(set(entry) == {"question_id", "answer"} for entry in submission)
    # The default mode answers with a span of what OCR read on that image.
    read = {101: "MAPLE BAKERY OPEN DAILY", 102: "ROUTE 42 AIRPORT", 103: "ROUTE 42 AIRPORT"}
    assert all(e["answer"] and e["answer"] in read[e["question_id"]] for e in submission)
    scored = run_mmrag("eval", "score", "stvqa", "--gold", str(release / "ST-VQA.json"),
                       "--pred", str(out))  # fmt: skip
    anls = json.loads(scored.stdout)["anls"]
    report = (release / "runs" / "preds.report.md").read_text()
    assert f"| ANLS | {anls:.3f} | VTA 0.282 (task 3) |" in report
    assert "Not comparable with the published number" in report
    assert (release / "runs" / "preds.anls.png").stat().st_size > 1000
    assert not (release / "runs" / "preds.partial.jsonl").exists()
    assert (release / "runs" / "preds.ocr.jsonl").exists()  # the OCR cache stays for reruns
    assert anls >= 0.5  # these signs are read cleanly; free writing scored near zero on them


def test_missing_images_are_one_line_or_skipped(release: Path, tmp_path: Path):
    data = json.loads((release / "ST-VQA.json").read_text())
    data["data"].append({"question_id": 104, "question": "What?", "answers": ["x"],
                         "file_path": "imgs/gone.jpg"})  # fmt: skip
    path = tmp_path / "ST-VQA.json"
    path.write_text(json.dumps(data))
    args = ["eval", "run", "stvqa", "--data", str(path), "--images", str(release)]
    missing = run_mmrag(*args, "--out", str(tmp_path / "p.json"))
    assert_one_line_error(missing, "gone.jpg", "--skip-missing")
    skipped = run_mmrag(*args, "--out", str(tmp_path / "p.json"), "--skip-missing",
                        "--limit", "1", "--ocr-workers", "1")  # fmt: skip
    assert skipped.returncode == 0, skipped.stderr
    assert len(json.loads((tmp_path / "p.json").read_text())) == 1


def test_candidates_are_lines_and_their_word_runs_in_reading_order():
    from mmrag.generation.scene_text import candidates

    spans = candidates(["ROUTE 42", "TO THE AIRPORT", "route 42"])
    assert spans[:4] == ["ROUTE 42", "ROUTE", "42", "TO THE AIRPORT"]
    assert "THE AIRPORT" in spans and "TO THE AIRPORT" in spans
    assert sum(span.lower() == "route 42" for span in spans) == 1


def test_a_number_question_prefers_a_span_that_is_a_number():
    """The lines PP-OCR reads off a real bus photo: the digit inside a garbled word is no
    answer to "what number" when the bus's route number stands alone."""
    from mmrag.generation.reading.question import read_question
    from mmrag.generation.scene_text import answering, candidates

    spans = candidates(["M1SOL/SEUILLA", "10", "cero", "emisiones"])
    assert answering(read_question("What number is shown on this bus?"), spans) == ["10"]
    assert answering(read_question("What does the bus say?"), spans)[0] == "M1SOL/SEUILLA"


def test_the_choosers_answer_with_a_span_the_free_writer_need_not(smollm2, minilm):
    from mmrag.generation.scene_text import SceneTextAnswerer, candidates

    lines = ["MAPLE BAKERY", "OPEN DAILY", "01632 960123"]
    spans = candidates(lines)
    for mode in ("likelihood", "similarity"):
        answerer = SceneTextAnswerer(smollm2, mode=mode, embed=minilm.encode_texts)
        result = answerer.answer("What is the phone number on the sign?", lines)
        assert result.answer in spans and result.candidates == len(spans)
    similarity = SceneTextAnswerer(smollm2, mode="similarity", embed=minilm.encode_texts)
    named = similarity.answer("What is the name of the bakery?", lines)
    assert named.free is not None and "maple" in named.answer.lower()
