"""Scene text as evidence at index build: real PP-OCR (rapidocr-onnxruntime) over painted signs.

The corpus is a JSONL collection of photos whose captions never spell the words on them, so a
question about a sign can only find it through the text OCR read.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.helpers import MMRAG, REPO, assert_one_line_error, run_mmrag, sign_jpeg

SIGNS = {
    "parking": (("DOUBLE PARKING", "PROHIBITED"), "A white notice on a brick wall."),
    "bakery": (("FRESH BREAD", "DAILY"), "A shop front on the high street."),
    "platform": (("PLATFORM 9",), "A sign above the stairs of a station."),
}


def sign_corpus(folder: Path, extra: dict[str, bytes] | None = None) -> Path:
    """photos.jsonl: one image source per sign (plus `extra` raw images), and a snippet."""
    folder.mkdir(parents=True, exist_ok=True)
    records = []
    for name, (lines, caption) in SIGNS.items():
        (folder / f"{name}.jpg").write_bytes(sign_jpeg(*lines))
        records.append({"id": name, "modality": "image", "title": "Street photo", "text": caption,
                        "image": f"{name}.jpg"})  # fmt: skip
    for name, data in (extra or {}).items():
        (folder / f"{name}.jpg").write_bytes(data)
        records.append({"id": name, "modality": "image", "title": "Street photo",
                        "text": "A photo.", "image": f"{name}.jpg"})  # fmt: skip
    records.append({"id": "s1", "modality": "text", "title": "Parking rules",
                    "text": "Parking rules differ from town to town."})  # fmt: skip
    corpus = folder / "photos.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records))
    return corpus


@pytest.fixture(scope="module")
def ocr_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("signs")
    corpus = sign_corpus(folder, extra={"broken": b"\xff\xd8 not really a jpeg"})
    out = folder / "index"
    result = run_mmrag(
        "index", "build", "--corpus", str(corpus), "--out", str(out), "--ocr", "--ocr-workers",
        "2", "--text-embedder", "none",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # The undecodable image is logged with its id and counted, never fatal.
    assert "broken.jpg" in result.stderr
    assert "OCR: text in 3 of 4 images" in result.stdout
    assert "1 images unreadable" in result.stdout
    return out


def test_the_text_on_a_sign_is_stored_with_confidence_and_box_and_found(ocr_index: Path):
    from mmrag.indexes.collection import Collection
    from mmrag.retrieval.hybrid import HybridRetriever

    collection = Collection(ocr_index)
    parking = collection.store.find("parking")
    assert [line.text for line in parking.ocr] == ["DOUBLE", "PARKING", "PROHIBITED"]
    assert all(line.confidence > 0.9 and len(line.box) == 4 for line in parking.ocr)
    assert collection.store.find("s1").ocr == ()
    retriever = HybridRetriever(collection)
    assert retriever.fusion == "rrf"  # OCR's BM25 has its own statistics: never raw
    for question, expected in [
        ("Which sign says double parking is prohibited?", "parking"),
        ("Where is fresh bread sold daily?", "bakery"),
        ("Which platform is up the stairs?", "platform"),
    ]:
        lists = retriever.ranked_lists(question)
        assert collection.store.get(int(lists["bm25/ocr"][0][0])).id == expected
        assert retriever.search(question, k=1)[0].source.id == expected


def test_stats_report_ocr_and_every_ocr_file_is_verified(ocr_index: Path, tmp_path: Path):
    import shutil

    stats = json.loads(run_mmrag("index", "stats", "--index", str(ocr_index)).stdout)
    assert stats["ocr"]["images"] == 4
    assert stats["ocr"]["images_with_text"] == 3
    assert stats["ocr"]["unreadable"] == 1
    assert "bm25-ocr" in stats["components"]
    manifest = json.loads((ocr_index / "manifest.json").read_text())
    assert "sources/ocr.jsonl" in manifest["store"]["files"]
    copy = tmp_path / "index"
    shutil.copytree(ocr_index, copy)
    path = copy / "sources" / "ocr.jsonl"
    data = bytearray(path.read_bytes())
    data[5] ^= 0x01
    path.write_bytes(bytes(data))
    result = run_mmrag("search", "parking", "--index", str(copy))
    assert_one_line_error(result, "sources/ocr.jsonl")


def test_ctrl_c_keeps_the_images_read_and_the_rerun_reads_only_the_rest(tmp_path: Path):
    corpus = sign_corpus(tmp_path / "c")
    for number in range(5):  # more signs, so there is something left to read after the Ctrl-C
        (tmp_path / "c" / f"more{number}.jpg").write_bytes(sign_jpeg(f"EXIT {number}"))
    with corpus.open("a") as handle:
        for number in range(5):
            record = {"id": f"more{number}", "modality": "image", "title": "Exit",
                      "text": "A sign.", "image": f"more{number}.jpg"}  # fmt: skip
            handle.write(json.dumps(record) + "\n")
    out, cache = tmp_path / "index", tmp_path / "ocr-cache.jsonl"
    command = [*MMRAG, "index", "build", "--corpus", str(corpus), "--out", str(out), "--ocr",
               "--ocr-workers", "1", "--ocr-cache", str(cache),
               "--text-embedder", "none"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(command, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (cache.exists() and len(cache.read_text().splitlines()) >= 3):  # header + 2
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert not out.exists()  # the build never swapped in
    done = len(cache.read_text().splitlines()) - 1
    assert 2 <= done < 8
    result = run_mmrag(*command[len(MMRAG) :])
    assert result.returncode == 0, result.stderr
    assert f"({8 - done} read, {done} cached, 0 unreadable)" in result.stdout


def test_a_missing_rapidocr_is_one_line_naming_the_package(tmp_path: Path):
    fake = tmp_path / "fake" / "rapidocr_onnxruntime"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('not installed')\n")
    corpus = sign_corpus(tmp_path / "c")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path / 'fake'}{os.pathsep}{REPO}"}
    result = subprocess.run(
        [*MMRAG, "index", "build", "--corpus", str(corpus), "--out", str(tmp_path / "i"),
         "--ocr", "--text-embedder", "none"],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=120,
    )  # fmt: skip
    assert_one_line_error(result, "pip install rapidocr-onnxruntime")


def test_low_confidence_and_symbol_only_lines_are_not_kept():
    from mmrag.indexes.ocr.reader import keep
    from mmrag.indexes.sources import OcrLine

    box = ((0, 0), (1, 0), (1, 1), (0, 1))
    lines = [OcrLine("EXIT", 0.99, box), OcrLine("日", 0.3, box), OcrLine("★★", 0.99, box)]
    assert [line.text for line in keep(lines, 0.5)] == ["EXIT"]
    assert [line.text for line in keep(lines, 0.2)] == ["EXIT", "日"]


def test_the_ocr_cache_refuses_another_reader_and_survives_a_torn_line(tmp_path: Path):
    from mmrag.indexes.errors import InputError
    from mmrag.indexes.ocr.cache import OcrCache
    from mmrag.indexes.sources import OcrLine

    path = tmp_path / "cache.jsonl"
    cache = OcrCache(path, {"det": "a"})
    cache.add("d1", [OcrLine("EXIT", 0.9, ((0, 0), (1, 0), (1, 1), (0, 1)))])
    cache.close()
    with path.open("ab") as handle:
        handle.write(b'{"digest": "d2", "li')  # a crash mid-write
    reopened = OcrCache(path, {"det": "a"})
    assert reopened.get("d1")[0].text == "EXIT" and reopened.get("d2") is None
    reopened.add("d2", [])
    reopened.close()
    assert OcrCache(path, {"det": "a"}).get("d2") == []
    with pytest.raises(InputError, match="other models"):
        OcrCache(path, {"det": "b"})


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip("SIGINT handling is tested on Linux")


@pytest.fixture(scope="module")
def reader():
    """One PP-OCR reader for the tests of how it reads (it loads in about a second)."""
    from mmrag.indexes.ocr.reader import OcrReader

    return OcrReader()


def decoded(data: bytes):
    from mmrag.indexes.images import decode_image

    return decode_image(data, 10**8)


def test_a_page_of_text_is_read_in_slices_as_in_one_call_and_capped_at_its_tallest_lines(reader):
    """Lines are recognised a slice at a time, so a deadline can stop a reading between
    slices; the slices keep PP-OCR's own batches, so every line reads as in one call."""
    from PIL import Image, ImageDraw, ImageFont

    from mmrag.indexes.ocr.reader import fitted_for_the_detector
    from tests.helpers import text_dense_png

    page = decoded(text_dense_png(side=700))
    stages = reader.stages
    engine = reader.engine
    engine.text_cls, engine.text_rec = stages.classify_all, stages.recognise_all
    try:
        found, _ = engine(fitted_for_the_detector(page)[0])
    finally:
        engine.text_cls, engine.text_rec = stages.classify, stages.recognise
    in_one_call = [(str(text).strip(), round(float(score), 4)) for _, text, score in found]
    recognise, steps = stages.recognise_all, []
    stages.recognise_all = lambda crops, *rest: steps.append(len(crops)) or recognise(crops, *rest)
    try:
        sliced = reader.read(page)
    finally:
        stages.recognise_all = recognise
    assert len(steps) > 2 and sum(steps) >= len(sliced)
    assert [(line.text, line.confidence) for line in sliced] == [
        pair for pair in in_one_call if pair[0]
    ]

    asked = []
    assert reader.read(page, stop=lambda: asked.append(1) or True) == [] and asked

    headline = Image.new("RGB", (700, 120), "white")
    font = ImageFont.load_default(size=60)
    ImageDraw.Draw(headline).text((10, 20), "HARBOR INN", fill="black", font=font)
    page.paste(headline, (0, 300))
    capped = reader.read(page, max_lines=3)
    assert len(capped) == 3 and any(line.text == "HARBOR INN" for line in capped)


def test_a_step_of_line_reading_is_sized_by_its_pixels_not_its_lines(reader):
    """PP-OCR pads each batch of lines to its widest, 48 pixels high: a step of 24 lines read
    0.6 MP of ordinary lines but 14 MP of lines 250 times as wide as high, and 100 such lines
    ran 56-59 s against a 30 s deadline. A step is now whole batches up to about what four
    batches of ordinary lines cost, or a single batch, whatever the lines' width."""
    import math

    import numpy as np

    recogniser = reader.stages.recognise_all
    _, height, least = recogniser.rec_image_shape
    batch = recogniser.rec_batch_num

    def pixels(crops: list[np.ndarray]) -> int:  # the recogniser's input, as PP-OCR pads it
        total = 0
        for start in range(0, len(crops), batch):
            part = crops[start : start + batch]
            widest = max(crop.shape[1] / crop.shape[0] for crop in part)
            total += len(part) * height * max(least, math.ceil(height * widest))
        return total

    ordinary = 4 * batch * height * 480  # four batches of lines ten times as wide as high
    for shape, count in [((8, 2000), 100), ((40, 400), 100)]:
        crops = [np.zeros((*shape, 3), np.uint8) for _ in range(count)]
        steps = [[crops[i] for i in step] for step in reader.stages.slices(crops)]
        assert sum(map(len, steps)) == count
        assert all(len(step) % batch == 0 for step in steps[:-1])  # PP-OCR's batches, whole
        assert all(len(step) <= batch or pixels(step) <= ordinary for step in steps)
    assert len(steps) < count / batch  # ordinary lines: several batches a step


def blank_png(width: int, height: int) -> bytes:
    """A white 1-bit PNG, as the reported uploads were (a few KB for 40 megapixels)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("1", (width, height), 1).save(buffer, format="PNG")
    return buffer.getvalue()


def test_whatever_an_image_s_shape_the_detector_gets_at_most_4_megapixels(reader):
    """PP-OCR's detector scales an image's short side up to 736 px: an 8 x 2000 strip became a
    736 x 46,016 input (4.7 GB, 26 s), and a 100 x 399,000 PNG padded at full size, 2.5
    gigapixels. Fitted first (long side 2000, at most 8:1), no input passes 736 x 5888."""
    from mmrag.indexes.ocr.reader import MAX_ASPECT

    detect = reader.engine.text_det.infer
    inputs = []
    reader.engine.text_det.infer = lambda batch: inputs.append(batch.shape) or detect(batch)
    try:
        for size in [(8, 40_000), (40_000, 8)]:
            assert reader.read(decoded(blank_png(*size))) == []
    finally:
        reader.engine.text_det.infer = detect
    short = reader.engine.text_det.limit_side_len
    largest = short * (short * MAX_ASPECT + 32)  # each side is rounded to a multiple of 32
    assert len(inputs) == 2 and all(h * w <= largest for *_, h, w in inputs), inputs


def test_a_banner_scaled_for_the_detector_is_read_where_it_is(reader):
    """An image past 2000 px is read scaled down, and its boxes are in its own pixels."""
    from PIL import Image, ImageDraw, ImageFont

    banner = Image.new("RGB", (6000, 120), "white")
    draw, font = ImageDraw.Draw(banner), ImageFont.load_default(size=80)
    draw.text((3000, 15), "OPENING", fill="black", font=font)
    drawn = draw.textbbox((3000, 15), "OPENING", font=font)
    [line] = reader.read(banner)
    assert line.text == "OPENING"
    xs, ys = [x for x, _ in line.box], [y for _, y in line.box]
    found = (min(xs), min(ys), max(xs), max(ys))
    assert all(abs(a - b) <= 30 for a, b in zip(found, drawn, strict=True)), (found, drawn)


def test_a_reading_stopped_while_the_detector_runs_ends_there(reader):
    """Detection is one onnxruntime run, about 2 s on 2 cores for a page: a reading's stop
    (its deadline, its client gone) ends it mid-run rather than after it."""
    from mmrag.indexes.ocr.reader import ReadingStopped
    from tests.helpers import text_dense_png

    detect = reader.engine.text_det.infer
    ended = []

    def watched(batch):
        try:
            return detect(batch)
        except ReadingStopped:
            ended.append("mid-run")
            raise

    looks = []  # the first look, as the run starts, finds no reason to stop; the next does
    page = decoded(text_dense_png(side=2000))
    reader.engine.text_det.infer = watched
    try:
        lines = reader.read(page, stop=lambda: bool(looks.append(1) or len(looks) > 1))
    finally:
        reader.engine.text_det.infer = detect
    assert lines == [] and ended == ["mid-run"]


def test_readings_run_at_once_and_none_waits_out_another(reader):
    """One lock held for a whole reading made the next photo question wait 14.5 s. The first
    reading here holds still in its `stop()` until a second one has finished: under such a
    lock the second would wait for the first, and the first for it (until its 30 s are up)."""
    from tests.helpers import sign_jpeg, text_dense_png

    inside, second_done, first_saw = threading.Event(), threading.Event(), []

    def holding_still() -> bool:
        if not inside.is_set():
            inside.set()
            first_saw.append(second_done.wait(timeout=30))
        return False

    page = decoded(text_dense_png(side=700))
    first = threading.Thread(target=reader.read, args=(page,), kwargs={"stop": holding_still})
    first.start()
    assert inside.wait(timeout=60)
    second = reader.read(decoded(sign_jpeg("EXIT")))
    second_done.set()
    first.join()
    assert [line.text for line in second] == ["EXIT"] and first_saw == [True]
