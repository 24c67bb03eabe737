"""`mmrag eval run` as a user runs it: the real CLI, the sample index, the embedded models.

One test answers every val question of the sample corpus in the full setting (the numbers the
report and `eval score` must agree on); the others use `--limit` to stay quick.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from PIL import Image

from mmrag.evaluation.errors import EvaluationError
from mmrag.evaluation.runs.checkpoint import Checkpoint, partial_path
from tests.helpers import (
    SAMPLE,
    SAMPLE_JSON,
    assert_one_line_error,
    interruptible_mmrag,
    run_mmrag,
    slowed_down,
    wait_until,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SENTENCE_END = (".", "!", "?", '"')


def webqa_args(index: Path, out: Path, *extra: str) -> list[str]:
    return [
        *("eval", "run", "webqa", "--data", str(SAMPLE_JSON), "--index", str(index)),
        *("--split", "val", "--out", str(out), *extra),
    ]


def table_rows(report: str, heading: str) -> dict[str, list[str]]:
    """The rows of the first Markdown table under `## heading`, keyed by their first cell."""
    section = report.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[1:]]
    return {row[0]: row[1:] for row in cells}


def assert_png(path: Path) -> None:
    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC), path
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        assert image.width > 200 and image.height > 200, image.size


def corpus_ids(questions) -> tuple[set[str], set[str]]:
    images, snippets = set(), set()
    for question in questions:
        for source in (*question.pos_sources, *question.neg_sources):
            (images if source.modality == "image" else snippets).add(source.id)
    return images, snippets


def test_full_setting_over_every_val_question_is_scored_as_eval_score_does(
    hybrid_index: Path, sample_questions, tmp_path: Path
) -> None:
    out = tmp_path / "preds.json"
    images = str(SAMPLE / "imgs.tsv")
    result = run_mmrag(*webqa_args(hybrid_index, out, "--setting", "full", "--images", images))
    assert result.returncode == 0, result.stderr
    val = [q for q in sample_questions if q.split == "val"]
    summary = result.stdout.strip().splitlines()
    assert len(summary) == 1 and f"{len(val)} questions ({len(val)} answered" in summary[0]

    # The official submission: every val guid, typed source ids from the corpus, sentences.
    predictions = json.loads(out.read_text())
    assert list(predictions) == [q.guid for q in val]
    image_ids, snippet_ids = corpus_ids(sample_questions)
    for guid, prediction in predictions.items():
        assert set(prediction) == {"sources", "answer"}
        assert 1 <= len(prediction["sources"]) <= 2, guid
        for source in prediction["sources"]:
            if isinstance(source, int):
                assert str(source) in image_ids, (guid, source)
            else:
                assert isinstance(source, str) and source in snippet_ids, (guid, source)
        answer = prediction["answer"].strip()
        assert len(answer.split()) >= 3 and answer.endswith(SENTENCE_END), (guid, answer)
        assert not re.search(r"\[\d+\]", answer), answer  # citation markers removed
    assert not partial_path(out).exists()

    report = (tmp_path / "preds.report.md").read_text()
    assert "Not comparable with the published numbers" in report
    assert "FL needs BART" in report and "given and found" in report
    per_qcate = table_rows(report, "Per Qcate (percent)")
    assert set(per_qcate) == {q.qcate for q in val}
    assert_png(tmp_path / "preds.retrieval_f1.png")
    assert_png(tmp_path / "preds.acc.png")
    assert "![retrieval_f1 per Qcate](preds.retrieval_f1.png)" in report

    score = run_mmrag(
        *("eval", "score", "webqa", "--gold", str(SAMPLE_JSON), "--pred", str(out)),
        *("--no-fl", "--split", "val"),
    )
    assert score.returncode == 0, score.stderr
    metrics = json.loads(score.stdout)
    overall = table_rows(report, "Scores (percent)")["all"]  # n, F1, FL, Acc, FL×Acc
    assert overall[0] == str(len(val))
    assert overall[1] == f"{100 * metrics['retrieval_f1']:.2f}"
    assert overall[3] == f"{100 * metrics['acc']:.2f}"
    assert overall[2] == "n/a" and metrics["fl"] is None
    for qcate, entry in metrics["by_qcate"].items():
        row = per_qcate[qcate]
        assert row[0] == str(entry["n"])
        assert row[1] == f"{100 * entry['retrieval_f1']:.2f}", qcate
        assert row[3] == f"{100 * entry['acc']:.2f}", qcate
    assert f"retrieval F1 {100 * metrics['retrieval_f1']:.2f}" in summary[0]

    # Attribution: where each answer's citations came from, and ALCE's recall and precision.
    origins = table_rows(report, "Attribution")
    assert sum(int(row[0]) for row in origins.values()) == len(val)
    assert not any(label.startswith("declined") for label in origins)  # --abstain never
    assert overall[7] == "0.00"  # the decline rate column
    for name in ("citation_recall", "citation_precision", "invented_rate"):
        assert 0.0 <= metrics[name] <= 1.0, name
    assert metrics["decline_rate"] == 0.0


@pytest.fixture(scope="module")
def tiny_bart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.fixtures.tiny_bart import build_tiny_bart

    return build_tiny_bart(tmp_path_factory.mktemp("bart") / "tiny-bart")


def test_restricted_setting_cites_only_the_questions_own_facts(
    hybrid_index: Path, sample_questions, tiny_bart: Path, tmp_path: Path
) -> None:
    out = tmp_path / "restricted.json"
    extra = ("--setting", "restricted", "--limit", "4", "--fl-model", str(tiny_bart))
    result = run_mmrag(*webqa_args(hybrid_index, out, *extra))
    assert result.returncode == 0, result.stderr
    predictions = json.loads(out.read_text())
    by_guid = {q.guid: q for q in sample_questions}
    assert len(predictions) == 4
    for guid, prediction in predictions.items():
        question = by_guid[guid]
        own = {s.id for s in (*question.pos_sources, *question.neg_sources)}
        assert prediction["sources"], guid
        assert {str(source) for source in prediction["sources"]} <= own, guid
    report = (tmp_path / "restricted.report.md").read_text()
    overall = table_rows(report, "Scores (percent)")["all"]
    assert overall[0] == "4" and overall[2] != "n/a"  # FL computed with the given BART
    assert 0.0 <= float(overall[2]) <= 100.0
    published = table_rows(report, "Published baselines (percent)")
    assert published["retrieval F1"][:3] == ["all", "VLP", "restricted"]
    assert "full" not in {row[2] for row in published.values()}  # no other setting's numbers
    assert_png(tmp_path / "restricted.fl_x_acc.png")


def complete_lines(path: Path) -> list[str]:
    text = path.read_text()
    return text[: text.rfind("\n") + 1].splitlines()


def interrupt_after(
    args: list[str], partial: Path, answered: int, *, slowed: bool = False
) -> subprocess.CompletedProcess:
    """Start a run and press Ctrl-C once `answered` questions are in the partial file; with
    `slowed`, on a CPU ten times slower from then on, well into the next question's answer."""
    with interruptible_mmrag(*args) as process:  # a Ray run stays on loopback
        wait_until(
            process,
            lambda: partial.exists() and len(complete_lines(partial)) > answered,
            timeout_s=120,
        )
        with slowed_down(process) if slowed else contextlib.nullcontext():
            time.sleep(0.5 if slowed else 0)
            process.send_signal(signal.SIGINT)
            stdout, stderr = process.communicate(timeout=120)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def test_ctrl_c_keeps_the_partial_file_and_resume_skips_finished_questions(
    hybrid_index: Path, sample_questions, tmp_path: Path
) -> None:
    out = tmp_path / "preds.json"
    partial = partial_path(out)
    interrupted = interrupt_after(webqa_args(hybrid_index, out), partial, answered=2, slowed=True)
    assert interrupted.returncode == 130, interrupted.stderr  # not an abort (-6)
    assert "terminate called" not in interrupted.stderr
    assert "rerun with --resume" in interrupted.stderr and not out.exists()

    # Mark the finished answers: a question answered again would lose its marker.
    lines = complete_lines(partial)
    header, done = lines[0], [json.loads(line) for line in lines[1:]]
    assert json.loads(header)["run"]["setting"] == "full" and len(done) >= 2
    for entry in done:
        entry["record"]["prediction"]["answer"] = f"Marker for {entry['id']}."
    partial.write_text("\n".join([header, *(json.dumps(entry) for entry in done)]) + "\n")

    limit = ("--limit", "3")
    assert_one_line_error(run_mmrag(*webqa_args(hybrid_index, out, *limit)), "--resume")
    other = run_mmrag(*webqa_args(hybrid_index, out, *limit, "--resume", "--setting", "restricted"))
    assert_one_line_error(other, "different run", "setting 'full'")
    assert partial.exists() and len(complete_lines(partial)) == len(done) + 1  # untouched

    resumed = run_mmrag(*webqa_args(hybrid_index, out, *limit, "--resume"))
    assert resumed.returncode == 0, resumed.stderr
    first3 = [q.guid for q in sample_questions if q.split == "val"][:3]
    kept = [guid for guid in first3 if guid in {entry["id"] for entry in done}]
    assert f"({3 - len(kept)} answered, {len(kept)} resumed" in resumed.stdout
    predictions = json.loads(out.read_text())
    assert list(predictions) == first3
    for guid in first3:
        answer = predictions[guid]["answer"]
        assert (answer == f"Marker for {guid}.") == (guid in kept), (guid, answer)
        assert answer.strip()
    assert not partial.exists()


def test_refusals_come_before_any_model_loads(hybrid_index: Path, tmp_path: Path) -> None:
    out = tmp_path / "preds.json"
    missing = str(tmp_path / "nope.tsv")
    assert_one_line_error(
        run_mmrag(*webqa_args(hybrid_index, out, "--images", missing)), "--images", "nope.tsv"
    )
    assert_one_line_error(run_mmrag(*webqa_args(hybrid_index, out, "--limit", "0")), "--limit")
    partial_path(out).write_text("not json\n")
    assert_one_line_error(run_mmrag(*webqa_args(hybrid_index, out, "--resume")), "not JSON")


def test_checkpoint_drops_a_torn_last_line_and_appends_after_it(tmp_path: Path) -> None:
    out = tmp_path / "preds.json"
    run = {"bench": "webqa", "setting": "full"}
    first = Checkpoint.open(out, run, resume=False)
    first.append("g1", {"prediction": {"answer": "A."}})
    first.close()
    with partial_path(out).open("a") as handle:
        handle.write('{"id": "g2", "record": {"predic')  # killed mid-write
    resumed = Checkpoint.open(out, run, resume=True)
    assert list(resumed.records) == ["g1"] and resumed.resumed == 1
    resumed.append("g2", {"prediction": {"answer": "B."}})
    resumed.close()
    lines = partial_path(out).read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines[1:]] == ["g1", "g2"]
    with pytest.raises(EvaluationError, match=r"different run.*bench 'webqa'"):
        Checkpoint.open(out, {**run, "bench": "aokvqa"}, resume=True)
    resumed.finish(out, "{}\n")
    assert out.read_text() == "{}\n" and not partial_path(out).exists()


def webqa_partial_file(index: Path, out: Path, *entries: dict) -> Path:
    """OUT.partial.jsonl as this run's `--resume` reads it: its header, then `entries`."""
    from mmrag.evaluation.runs.checkpoint import FORMAT, VERSION
    from mmrag.evaluation.runs.webqa import WebQARun
    from mmrag.service.cli import build_parser

    argv = webqa_args(index, out, "--limit", "2")
    bench = WebQARun(build_parser(argv).parse_args(argv))
    run = json.loads(json.dumps(bench.describe(bench.settings())))
    lines = [{"format": FORMAT, "version": VERSION, "run": run}, *entries]
    partial = partial_path(out)
    partial.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return partial


def test_a_resumed_partial_file_is_checked_line_by_line_before_anything_is_written(
    hybrid_index: Path, sample_questions, tmp_path: Path
) -> None:
    """Issue 37: a line with an empty record was a 23-line KeyError on every resume; a
    prediction of the wrong type went into the submission, the partial file was deleted, and
    the run failed in scoring with no report; a question given twice: the last line won."""
    out = tmp_path / "preds.json"
    first, second = [q.guid for q in sample_questions if q.split == "val"][:2]
    good = {"prediction": {"sources": ["x"], "answer": "It is red."}, "timings": {}}
    cases = [
        ({"id": first, "record": {}}, "line 2 holds no answer", "prediction: field required"),
        (
            {"id": first, "record": {**good, "prediction": {"sources": [], "answer": 5}}},
            "line 2",
            "prediction.answer: input should be a valid string",
        ),
        ({"id": 7, "record": good}, "line 2 is not a finished question", "string 'id'"),
    ]
    for entry, *says in cases:
        partial = webqa_partial_file(hybrid_index, out, entry)
        written = partial.read_text()
        result = run_mmrag(*webqa_args(hybrid_index, out, "--limit", "2", "--resume"))
        assert_one_line_error(result, str(partial), *says, "delete that line")
        assert partial.read_text() == written and not out.exists()
    twice = [{"id": first, "record": good}, {"id": second, "record": good}]
    webqa_partial_file(hybrid_index, out, *twice, {"id": first, "record": good})
    result = run_mmrag(*webqa_args(hybrid_index, out, "--limit", "2", "--resume"))
    assert_one_line_error(result, f"line 4 repeats question {first!r} of line 2")


def test_a_second_run_on_the_same_out_is_refused_while_the_first_runs(
    hybrid_index: Path, tmp_path: Path
) -> None:
    """Issue 37: two runs on one --out appended to one partial file, each question twice,
    and one failed after answering everything."""
    from mmrag.evaluation.runs.checkpoint import lock_path

    out = tmp_path / "preds.json"
    with interruptible_mmrag(*webqa_args(hybrid_index, out, "--limit", "2")) as first:
        wait_until(first, lock_path(out).exists)
        second = run_mmrag(*webqa_args(hybrid_index, out, "--limit", "2"))
        assert_one_line_error(second, f"--out {out}", "another `mmrag eval run` is writing it")
        stdout, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr
    assert "(2 answered, 0 resumed" in stdout and not lock_path(out).exists()
    assert not partial_path(out).exists() and len(json.loads(out.read_text())) == 2


# --- A-OKVQA ---

AOKVQA_IMAGES = ("30000006", "30000007", "30000008")


def aokvqa_item(number: int, image_id: int) -> dict:
    questions = ("What color is the door?", "What shape is the sign?", "How many towers?")
    choices = (["red", "blue", "green", "yellow"], ["round", "square", "star", "oval"])
    return {
        "question_id": f"aok{number}",
        "image_id": image_id,
        "question": questions[number % 3],
        "choices": choices[number % 2],
        "correct_choice_idx": number % 4,
        "direct_answers": ["red"] * 6 + ["blue"] * 4,
        "difficult_direct_answer": number == 2,
        "rationales": ["The door is painted red.", "It is red.", "The picture shows red."],
    }


@pytest.fixture
def aokvqa_files(tmp_path: Path) -> dict[str, Path]:
    """Three A-OKVQA items whose COCO images are sample-corpus JPEGs, and a fourth without."""
    from mmrag.indexes.images import WebQAImageStore

    store = WebQAImageStore(SAMPLE / "imgs.tsv")
    coco = tmp_path / "coco"
    (coco / "val2017").mkdir(parents=True)
    items = []
    for number, image_id in enumerate(AOKVQA_IMAGES):
        jpeg = coco / "val2017" / f"{int(image_id):012}.jpg"
        jpeg.write_bytes(store.read_bytes(image_id))
        items.append(aokvqa_item(number, int(image_id)))
    gold = tmp_path / "aokvqa_v1p0_val.json"
    gold.write_text(json.dumps(items))
    with_missing = tmp_path / "missing" / "aokvqa_v1p0_val.json"
    with_missing.parent.mkdir()
    with_missing.write_text(json.dumps([*items, aokvqa_item(3, 424242)]))
    captions = tmp_path / "captions.json"
    captions.write_text(json.dumps({image_id: "A red door." for image_id in AOKVQA_IMAGES}))
    return {"gold": gold, "with_missing": with_missing, "coco": coco, "captions": captions}


def test_aokvqa_run_writes_what_eval_score_reads(aokvqa_files: dict[str, Path], tmp_path):
    out = tmp_path / "aok.json"
    result = run_mmrag(
        *("eval", "run", "aokvqa", "--data", str(aokvqa_files["with_missing"])),
        *("--coco-dir", str(aokvqa_files["coco"]), "--out", str(out), "--skip-missing"),
        *("--captions", str(aokvqa_files["captions"])),
    )
    assert result.returncode == 0, result.stderr
    assert "3 questions (3 answered, 0 resumed, 1 skipped" in result.stdout
    predictions = json.loads(out.read_text())
    items = {item["question_id"]: item for item in json.loads(aokvqa_files["gold"].read_text())}
    assert list(predictions) == list(items)
    for qid, prediction in predictions.items():
        assert set(prediction) == {"multiple_choice", "direct_answer", "rationale"}
        assert prediction["multiple_choice"] in items[qid]["choices"]
        assert prediction["direct_answer"].strip() and prediction["rationale"].strip()
    report = (tmp_path / "aok.report.md").read_text()
    assert "000000424242.jpg" in report  # the skipped question's image is named
    assert_png(tmp_path / "aok.accuracy.png")

    score = run_mmrag(
        "eval", "score", "aokvqa", "--gold", str(aokvqa_files["gold"]), "--pred", str(out)
    )
    assert score.returncode == 0, score.stderr
    metrics = json.loads(score.stdout)
    scores = table_rows(report, "Scores")
    assert scores["MC accuracy"][0] == f"{metrics['mc']:.2f}"
    assert scores["DA accuracy"][0] == f"{metrics['da']:.2f}"
    assert scores["METEOR"][0] == f"{metrics['meteor']:.3f}"


def test_aokvqa_missing_image_is_a_one_line_error_naming_it(
    aokvqa_files: dict[str, Path], tmp_path: Path
) -> None:
    result = run_mmrag(
        *("eval", "run", "aokvqa", "--data", str(aokvqa_files["with_missing"])),
        *("--coco-dir", str(aokvqa_files["coco"]), "--out", str(tmp_path / "p.json")),
    )
    missing = aokvqa_files["coco"] / "val2017" / "000000424242.jpg"
    assert_one_line_error(result, str(missing), "--skip-missing")
