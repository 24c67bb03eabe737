"""Asking about your own photo: the uploaded image is source [1] and its OCR text the evidence,
through `/v1/answer` (multipart) and `mmrag ask --image`, with real PP-OCR and SmolLM2."""

from __future__ import annotations

import io
import json
import os
import sys
import threading
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from PIL import Image, ImageDraw, ImageFont

from tests.helpers import assert_one_line_error, run_mmrag, sign_jpeg
from tests.test_service import png_bomb

SIGN = sign_jpeg("DOUBLE PARKING", "PROHIBITED", "AT ALL TIMES", size=(420, 180))
QUESTION = "What does the sign say about parking?"


@pytest.fixture(scope="module")
def client(hybrid_index: Path):
    from mmrag.core.components import build_pipeline
    from mmrag.core.settings import Settings
    from mmrag.service.app import create_app

    settings = Settings(index=hybrid_index)
    with TestClient(create_app(settings, build_pipeline(settings))) as client:
        yield client


def test_an_uploaded_sign_is_source_1_and_its_text_answers(client: TestClient):
    response = client.post(
        "/v1/answer", data={"question": QUESTION}, files={"image": ("sign.jpg", SIGN)}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    first = body["sources"][0]
    assert first["source_id"].startswith("upload-") and first["image_url"] is None
    assert first["ocr_text"] == "DOUBLE PARKING PROHIBITED AT ALL TIMES"
    assert [line["text"] for line in first["ocr_lines"]][:2] == ["DOUBLE", "PARKING"]
    # The answer rests on the photo's text, and cites it as [1].
    assert "prohibited" in body["answer_without_markers"].lower()
    assert [c["source_id"] for c in body["citations"]] == [first["source_id"]]


def test_an_upload_streams_like_any_answer(client: TestClient):
    form = {"question": QUESTION, "stream": "true", "max_sources": "1"}
    response = client.post("/v1/answer", data=form, files={"image": ("sign.jpg", SIGN)})
    assert response.headers["content-type"].startswith("text/event-stream")
    assert "event: answer" in response.text and "upload-" in response.text


def test_bad_uploads_are_422_with_one_line_and_never_decoded_when_huge(client: TestClient):
    bomb = client.post(
        "/v1/answer", data={"question": "What?"}, files={"image": ("b.png", png_bomb())}
    )
    assert bomb.status_code == 422
    assert "13000x13000 pixels is larger" in bomb.json()["detail"]  # read from the header
    junk = client.post(
        "/v1/answer", data={"question": "What?"}, files={"image": ("x.jpg", b"GIF8")}
    )
    assert junk.status_code == 422 and "undecodable image" in junk.json()["detail"]
    missing = client.post("/v1/answer", data={"question": "What?"}, files={"other": ("x", b"1")})
    assert missing.status_code == 422 and "image" in missing.json()["detail"]
    bad_k = client.post("/v1/answer", data={"question": "What?", "k": "many"},
                        files={"image": ("sign.jpg", SIGN)})  # fmt: skip
    assert bad_k.status_code == 422 and bad_k.json()["detail"].startswith("k:")
    crowd = {"question": "What?", **{f"extra{i}": "1" for i in range(9)}}
    crowded = client.post("/v1/answer", data=crowd, files={"image": ("sign.jpg", SIGN)})
    assert crowded.status_code == 422 and crowded.json()["detail"].startswith("form: Too many")
    # The service still answers JSON questions afterwards.
    assert client.post("/v1/answer", json={"question": QUESTION}).status_code == 200


def test_ask_with_an_image_answers_from_its_sign(hybrid_index: Path, tmp_path: Path):
    photo = tmp_path / "sign.jpg"
    photo.write_bytes(SIGN)
    result = run_mmrag("ask", QUESTION, "--image", str(photo), "--index", str(hybrid_index))
    assert result.returncode == 0, result.stderr
    answer, first = result.stdout.splitlines()[:2]
    assert "prohibited" in answer.lower() and answer.rstrip(".").endswith("[1]")
    assert first.strip().startswith("[1] Your image")
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"\xff\xd8 no")
    bad = run_mmrag("ask", QUESTION, "--image", str(broken), "--index", str(hybrid_index))
    assert_one_line_error(bad, "--image", "undecodable image")
    absent = run_mmrag("ask", QUESTION, "--image", str(tmp_path / "no.jpg"), "--index", "x")
    assert_one_line_error(absent, "--image", "no.jpg")
    strip = tmp_path / "strip.png"
    strip.write_bytes(png_of(Image.new("RGB", (2001, 1), "white")))
    thin = run_mmrag("ask", QUESTION, "--image", str(strip), "--index", str(hybrid_index))
    assert_one_line_error(thin, "--image", "2001x1 pixels is too thin to read")


def png_of(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def test_a_strip_is_refused_with_422_and_a_banner_is_read(client: TestClient):
    """PP-OCR rounds each side to a multiple of 32 after scaling the long side to 2000 px: a
    2001 x 1 PNG (88 bytes) and a 4000 x 33 banner each made it raise, a 500."""
    strip = png_of(Image.new("RGB", (2001, 1), "white"))
    form = {"question": "What does the banner announce?"}
    refused = client.post("/v1/answer", data=form, files={"image": ("s.png", strip)})
    assert refused.status_code == 422
    assert "2001x1 pixels is too thin to read" in refused.json()["detail"]

    banner = Image.new("RGB", (4000, 33), "white")
    ImageDraw.Draw(banner).text(
        (10, 2), "GRAND OPENING TODAY", fill="black", font=ImageFont.load_default(size=26)
    )
    read = client.post("/v1/answer", data=form, files={"image": ("b.png", png_of(banner))})
    assert read.status_code == 200, read.text
    assert read.json()["sources"][0]["ocr_text"] == "GRAND OPENING TODAY"


# Sign questions SmolLM2 declines when it writes freely from the OCR text: the answer is read
# off the sign instead (the span `eval run stvqa` would choose), quoted and cited to the photo.
# A question the photo has nothing to do with is still declined.
READ_OFF = [
    (("QUIZ NIGHT", "EVERY THURSDAY"), "On which day is the quiz night?", "THURSDAY"),
    (("HALE AND DAUGHTERS", "EST 1902"), "In what year was this shop established?", "1902"),
    (("ROUTE 12", "TO GREYWICK"), "Where does this bus go?", "GREYWICK"),
]


@pytest.mark.parametrize(("lines", "question", "says"), READ_OFF)
def test_a_sign_question_the_model_declines_is_answered_from_the_signs_text(
    client: TestClient, lines: tuple[str, ...], question: str, says: str
):
    photo = sign_jpeg(*lines, size=(420, 180))
    body = client.post(
        "/v1/answer", data={"question": question}, files={"image": ("sign.jpg", photo)}
    ).json()
    assert says in body["answer"] and not body["abstained"], body["answer"]
    assert [c["marker"] for c in body["citations"]] == [1], body
    assert body["citations"][0]["source_id"] == body["sources"][0]["source_id"]


def test_a_question_the_attached_sign_has_nothing_to_do_with_is_declined(client: TestClient):
    photo = sign_jpeg("QUIZ NIGHT", "EVERY THURSDAY", size=(420, 180))
    body = client.post(
        "/v1/answer",
        data={"question": "Who won the 1998 football world cup?"},
        files={"image": ("sign.jpg", photo)},
    ).json()
    assert body["abstained"] and body["citations"] == [], body["answer"]


def test_an_upload_past_the_deadline_stops_being_read_and_says_so(client: TestClient):
    """OCR of an upload was outside the deadline (a text-dense page took 37 s of a 30 s
    budget, absent from the timings): the request's one deadline now covers it, and a page
    still unread when it passes is left unread."""
    from mmrag.core.settings import Settings
    from mmrag.service.app import create_app

    pipeline = client.app.state.pipeline
    settings = Settings(index=pipeline.retriever.collection.root, request_timeout_s=0.001)
    with TestClient(create_app(settings, pipeline)) as hurried:
        response = hurried.post(
            "/v1/answer", data={"question": QUESTION}, files={"image": ("sign.jpg", SIGN)}
        )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["generation_error"] == "timed out after 0.001 s" and body["answer"] == ""
    upload = body["sources"][0]
    assert upload["source_id"].startswith("upload-") and upload["ocr_lines"] == []
    assert body["timings"]["ocr_s"] > 0


def test_a_form_carries_the_conversation_as_json_and_the_photo_stays_source_1(
    client: TestClient,
):
    """The chat page sends its conversation with every question, a photo's included: in a
    multipart form the field is a JSON array (every form field is text)."""
    earlier = [
        {"role": "user", "content": "What is the parking rule at the Harbor Inn?"},
        {"role": "assistant", "content": "The sign says parking is prohibited [1]."},
    ]
    form = {"question": "Does it apply at all times?", "conversation": json.dumps(earlier)}
    response = client.post("/v1/answer", data=form, files={"image": ("sign.jpg", SIGN)})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["question"] == "Does the Harbor Inn apply at all times?"  # read with the turns
    assert body["sources"][0]["source_id"].startswith("upload-")
    bad = client.post(
        "/v1/answer",
        data={"question": "Does it?", "conversation": "[{"},
        files={"image": ("sign.jpg", SIGN)},
    )
    assert bad.status_code == 422 and "conversation" in bad.json()["detail"]


def niceness() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(sys.platform != "linux", reason="a priority per thread is Linux's")
def test_a_photo_is_read_below_the_cpu_priority_of_the_answers_beside_it():
    """On 2 cores a text question asked while a photo was read took 10 s instead of 3.4 s:
    llama.cpp's threads wait for each other at every step of a prompt, and the reading kept
    taking a core from one of them. The photo is read on threads of lower priority (and the
    threads onnxruntime starts inherit it), so the answers beside it come first."""
    from mmrag.core.attachments import OCR_NICENESS, ImageAttacher
    from mmrag.indexes.ocr.reader import OcrModels

    attacher = ImageAttacher(OcrModels(), min_confidence=0.5, max_pixels=10**8)
    seen: list[int] = []
    photo = attacher.attach(SIGN, stop=lambda: bool(seen.append(niceness())))
    assert photo.ocr_text == "DOUBLE PARKING PROHIBITED AT ALL TIMES"
    assert seen and set(seen) == {min(19, niceness() + OCR_NICENESS)}, seen
