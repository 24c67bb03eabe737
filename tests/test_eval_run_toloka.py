"""`mmrag eval run toloka` as a user runs it: the release CSV (rows of the Toloka fixture), its
images in a folder by URL file name, a tiny random OWLv2 passed by path, the embedded SmolLM2
naming the objects; and a grounding VLM behind a recording OpenAI-compatible server."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from tests.helpers import assert_one_line_error, jpeg_bytes, run_mmrag
from tests.openai_recorder import recording_server
from tests.test_eval_run import assert_png, table_rows

FIXTURE = Path(__file__).parent / "fixtures" / "toloka" / "train_sample.csv"
PUBLISHED = ("87.154", "76.347", "44.851", "21.292")


def fixture_rows(count: int) -> list[dict[str, str]]:
    with FIXTURE.open(newline="") as handle:
        return list(csv.DictReader(handle))[:count]


def write_release(tmp_path: Path, rows: list[dict[str, str]], *, gold: bool = True) -> Path:
    """The rows as a release CSV, and their images (noise JPEGs of the CSV's size) in imgs/."""
    columns = ["image", "width", "height", "left", "top", "right", "bottom", "question"]
    if not gold:
        columns = ["image", "width", "height", "question"]
    data = tmp_path / "test.csv"
    with data.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    images = tmp_path / "imgs"
    images.mkdir()
    for row in rows:
        size = (int(row["width"]), int(row["height"]))
        (images / row["image"].rsplit("/", 1)[1]).write_bytes(jpeg_bytes("gray", size))
    return data


def read_submission(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == ["image", "left", "top", "right", "bottom"]
        return list(reader)


def run_toloka(data: Path, out: Path, *flags: str):
    images = data.parent / "imgs"
    args = ("eval", "run", "toloka", "--data", str(data), "--images", str(images))
    return run_mmrag(*args, "--out", str(out), *flags)


def test_a_detector_run_boxes_every_question_and_scores_as_eval_score_does(tmp_path, tiny_owlv2):
    rows = fixture_rows(6)
    data = write_release(tmp_path, rows)
    images = tmp_path / "imgs"
    broken = images / rows[4]["image"].rsplit("/", 1)[1]
    broken.write_bytes(b"\xff\xd8 not a JPEG after all")
    (images / rows[5]["image"].rsplit("/", 1)[1]).unlink()
    out = tmp_path / "preds.csv"

    result = run_toloka(data, out, "--detector", str(tiny_owlv2), "--skip-missing")
    assert result.returncode == 0, result.stderr
    submitted = read_submission(out)
    assert [row["image"] for row in submitted] == [row["image"] for row in rows]
    for row, box in zip(rows[:4], submitted[:4], strict=True):
        left, top, right, bottom = (int(box[c]) for c in ("left", "top", "right", "bottom"))
        assert 0 <= left < right <= int(row["width"]) and 0 <= top < bottom <= int(row["height"])
    empty = {"left": "0", "top": "0", "right": "0", "bottom": "0"}
    assert [{k: box[k] for k in empty} for box in submitted[4:]] == [empty, empty]
    assert not (tmp_path / "preds.partial.jsonl").exists()

    scored = run_mmrag("eval", "score", "toloka", "--gold", str(data), "--pred", str(out))
    metrics = json.loads(scored.stdout)
    report = (tmp_path / "preds.report.md").read_text()
    scores = table_rows(report, "Scores")
    assert scores["mmrag (this run)"] == [
        f"{metrics['iou']:.3f}",
        f"{metrics['iou_gt_50']:.3f}",
        f"{metrics['iou_gt_70']:.3f}",
    ]
    published = [row[0] for name, row in scores.items() if name != "mmrag (this run)"]
    assert published == list(PUBLISHED)
    counts = table_rows(report, "Counts")
    assert counts["questions with a box"] == ["4"]
    assert counts["empty box: image does not decode"] == ["1"]
    assert counts["empty box: image missing"] == ["1"]
    assert "Not comparable" in report
    assert_png(tmp_path / "preds.iou.png")


def test_refusals_are_one_line_before_models_load(tmp_path, tiny_owlv2):
    data = write_release(tmp_path, fixture_rows(2))
    out = tmp_path / "preds.csv"
    assert_one_line_error(run_toloka(data, out), "no detector configured", "--detector")
    (tmp_path / "imgs" / "000000001093.jpg").unlink()
    missing = run_toloka(data, out, "--detector", str(tiny_owlv2))
    assert_one_line_error(missing, "000000001093.jpg: no such image", "--skip-missing")
    bad = run_toloka(data, out, "--detector", str(tmp_path / "nope"), "--skip-missing")
    assert_one_line_error(bad, "cannot load the detector")
    assert not out.exists()


def test_a_grounding_vlm_run_counts_replies_without_a_usable_box(tmp_path):
    rows = fixture_rows(3)  # 500x347, 640x480, 640x427
    data = write_release(tmp_path, rows, gold=False)  # a test CSV: no boxes, no score
    replies = iter(
        [
            '```json\n[{"bbox_2d": [406, 168, 434, 210], "label": "bus"}]\n```',
            "There is no such object.",
            '[{"bbox_2d": [900, 900, 1000, 1000], "label": "skis"}]',
        ]
    )
    out = tmp_path / "preds.csv"
    with recording_server(lambda _body: next(replies)) as server:
        result = run_toloka(
            data, out, "--grounder", "vlm", "--engine", "openai", "--vision",
            "--base-url", server.url,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    first, *rest = read_submission(out)
    # 500x347 is 504x336 on Qwen's grid: the box maps back and is rounded outwards.
    assert [int(first[c]) for c in ("left", "top", "right", "bottom")] == [402, 173, 431, 217]
    # No usable box: the whole image (IoU = the gold box's share of it), not the empty box.
    assert [[int(row[c]) for c in ("left", "top", "right", "bottom")] for row in rest] == [
        [0, 0, 640, 480],
        [0, 0, 640, 427],
    ]
    report = (tmp_path / "preds.report.md").read_text()
    assert "Not scored" in report
    counts = table_rows(report, "Counts")
    assert counts["whole image: no box found"] == ["2"]
    assert "no bbox_2d box" in report and "outside the 640x427 image" in report
