"""`mmrag eval run vlqa` as a user runs it: a val.json in the official format (a list of items
with an `answer` index), images in a folder, the official `{"val": [...]}` predictions read back
by `eval score vlqa`; the embedded SmolLM2 with captions, and a VLM behind a recording server."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

from PIL import Image

from tests.helpers import assert_one_line_error, run_mmrag, sign_jpeg
from tests.openai_recorder import image_urls, recording_server
from tests.test_eval_run import assert_png, table_rows

ITEMS = [
    {
        "qid": "vlqa-1",
        "image": "images/bars.jpg",
        "passage": "The red bar shows sales in 2019; sales doubled the year after.",
        "question": "What colour is the bar of 2019?",
        "answer_choices": ["red", "blue"],
        "answer": 0,
    },
    {
        "qid": "vlqa-2",
        "image": ["images/left.jpg", "images/right.jpg"],
        "passage": "Image [0] shows a lake; image [1] shows the sea.",
        "question": "Which image shows water that is salty?",
        "answer_choices": ["[0]", "[1]", "neither", "both"],
        "answer": 1,
    },
    {
        "qid": "vlqa-3",
        "image": "images/broken.jpg",
        "passage": "Blue whales are the largest animals.",
        "question": "Which animal is the largest?",
        "answer_choices": ["mouse", "blue whale"],
        "answer": 1,
    },
]


def plain_jpeg(color: str, size: tuple[int, int]) -> bytes:
    """One colour, nothing for OCR to read."""
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="JPEG")
    return buffer.getvalue()


def write_val(tmp_path: Path) -> Path:
    images = tmp_path / "images"
    images.mkdir()
    (images / "bars.jpg").write_bytes(sign_jpeg("SALES 2019", size=(320, 96)))
    (images / "left.jpg").write_bytes(plain_jpeg("blue", (40, 30)))
    (images / "right.jpg").write_bytes(plain_jpeg("green", (24, 36)))
    (images / "broken.jpg").write_bytes(b"\xff\xd8 broken")
    data = tmp_path / "val.json"
    data.write_text(json.dumps(ITEMS))
    return data


def run_vlqa(data: Path, out: Path, *flags: str):
    args = ("eval", "run", "vlqa", "--data", str(data), "--images", str(data.parent))
    return run_mmrag(*args, "--out", str(out), *flags)


def prompt_text(body: dict) -> str:
    return " ".join(
        message["content"] if isinstance(message["content"], str) else ""
        for message in body["messages"]
    )


def direct_answer(body: dict) -> str:
    """A text-only model that answers items 1 and 3 right and item 2 wrong."""
    text = prompt_text(body)
    return "blue whale" if "largest" in text else "red" if "2019" in text else "neither"


def test_the_official_files_are_read_and_written(tmp_path):
    data = write_val(tmp_path)
    captions = tmp_path / "captions.json"
    captions.write_text(json.dumps({"bars.jpg": "A bar chart."}))
    out = tmp_path / "preds.json"
    with recording_server(direct_answer) as server:  # text only: no --vision
        result = run_vlqa(
            data, out, "--engine", "openai", "--base-url", server.url,
            "--captions", str(captions), "--ocr",
        )  # fmt: skip
        requests = server.chat_requests()
    assert result.returncode == 0, result.stderr
    assert not any(image_urls(body) for body in requests)
    first = prompt_text(requests[0])  # the caption, then the text PP-OCR read on the sign
    assert "Image description: A bar chart. Text in the image: SALES 2019" in first
    assert "Passage" in first and "sales doubled" in first  # the passage, as knowledge
    written = json.loads(out.read_text())
    assert written == {"val": [0, 2, 1]}  # "red", "neither", "blue whale" by similarity

    scored = run_mmrag("eval", "score", "vlqa", "--gold", str(data), "--pred", str(out))
    accuracy = json.loads(scored.stdout)["accuracy"]
    assert accuracy == 2 / 3
    report = (tmp_path / "preds.report.md").read_text()
    assert table_rows(report, "Scores")["mmrag (this run)"] == ["66.67"]
    counts = table_rows(report, "Counts")
    assert counts["no image shown (missing or undecodable)"] == ["1"]  # broken.jpg
    assert counts["images with text read by OCR"] == ["1"]  # the sign, not the plain colours
    assert_png(tmp_path / "preds.accuracy.png")

    short = tmp_path / "short.json"
    short.write_text(json.dumps({"val": written["val"][:2]}))
    mismatch = run_mmrag("eval", "score", "vlqa", "--gold", str(data), "--pred", str(short))
    assert_one_line_error(mismatch, "2 answers for 3 questions")


def test_a_vlm_sees_each_image_and_sub_images_side_by_side(tmp_path):
    data = write_val(tmp_path)
    out = tmp_path / "preds.json"
    with recording_server(lambda _body: "[1]") as server:
        result = run_vlqa(
            data, out, "--engine", "openai", "--vision", "--base-url", server.url,
            "--format", "by-id",
        )  # fmt: skip
        requests = server.chat_requests()
    assert result.returncode == 0, result.stderr
    # Two requests per item (rationale, then direct answer); the similarity choice is local.
    sizes = []
    for body in requests[::2]:
        urls = image_urls(body)
        assert len(urls) <= 1
        if urls:
            payload = base64.b64decode(urls[0].partition(",")[2])
            sizes.append(Image.open(io.BytesIO(payload)).size)
    assert sizes == [(320, 96), (64, 36)]  # the two sub-images in a row; broken.jpg: no image
    # By id; the direct answer "[1]" is nearest the choice "[1]" of the second item.
    assert json.loads(out.read_text())["vlqa-2"] == 1
    assert list(json.loads(out.read_text())) == [item["qid"] for item in ITEMS]


def test_a_missing_image_is_refused_unless_skipped(tmp_path):
    data = write_val(tmp_path)
    (tmp_path / "images" / "right.jpg").unlink()
    out = tmp_path / "preds.json"
    assert_one_line_error(run_vlqa(data, out), "right.jpg: no such image", "--skip-missing")
    assert not out.exists()
