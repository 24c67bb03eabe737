"""Grounding through the service and the CLI: `POST /v1/ground`, boxes on cited images in
`/v1/answer` (the sample index, the embedded SmolLM2 naming, a tiny random OWLv2 boxing), and
`mmrag ground` with its one-line refusals."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from PIL import Image

from mmrag.core.components import build_pipeline
from mmrag.core.settings import Settings
from mmrag.service.app import create_app
from tests.helpers import assert_one_line_error, jpeg_bytes, run_mmrag

QUESTION = "What color is the door of the Harbor Inn?"


@pytest.fixture(scope="module")
def pipeline(hybrid_index: Path, tiny_owlv2: Path):
    return build_pipeline(Settings(index=hybrid_index, detector=str(tiny_owlv2)))


def client_for(pipeline) -> TestClient:
    settings = Settings(index=pipeline.retriever.collection.root)
    return TestClient(create_app(settings, pipeline))


def within(box: dict, width: int, height: int) -> bool:
    return 0 <= box["left"] < box["right"] <= width and 0 <= box["top"] < box["bottom"] <= height


def test_cited_images_carry_the_box_that_supports_the_answer(pipeline):
    with client_for(pipeline) as client:
        body = client.post("/v1/answer", json={"question": QUESTION, "modality": "image"}).json()
        images = {
            c["source_id"]: Image.open(
                io.BytesIO(client.get(f"/v1/sources/{c['source_id']}/image").content)
            ).size
            for c in body["citations"]
        }
    assert body["citations"], body
    for citation in body["citations"]:
        box = citation["box"]
        assert box is not None and within(box, *images[citation["source_id"]]), citation
        assert box["label"] and 0 <= box["score"] <= 1
    assert body["timings"]["ground_s"] > 0


def test_the_ground_route_boxes_an_upload_and_refuses_what_is_not_an_image(pipeline):
    form = {"question": "What do we drive for personal use?"}
    photo = jpeg_bytes("gray", (320, 200))
    with client_for(pipeline) as client:
        found = client.post("/v1/ground", data=form, files={"image": ("car.jpg", photo)})
        junk = client.post("/v1/ground", data=form, files={"image": ("x.jpg", b"GIF89a junk")})
        long = client.post(
            "/v1/ground", data={"question": "Why " * 300}, files={"image": ("car.jpg", photo)}
        )
    assert found.status_code == 200, found.text
    body = found.json()
    assert body["strategy"] == "detector" and (body["width"], body["height"]) == (320, 200)
    assert within(body["box"], 320, 200) and body["error"] is None and body["query"]
    assert junk.status_code == 422 and "undecodable image" in junk.json()["detail"]
    assert long.status_code == 422 and "question longer than" in long.json()["detail"]


def test_without_a_detector_the_route_says_how_to_configure_one(pipeline):
    unconfigured = copy.copy(pipeline)
    unconfigured.grounder = None
    photo = jpeg_bytes("gray", (32, 32))
    with client_for(unconfigured) as client:
        response = client.post("/v1/ground", data={"question": "Q?"}, files={"image": photo})
    assert response.status_code == 404
    assert response.json() == {
        "detail": "grounding is not configured: start the service with --detector NAME_OR_PATH"
    }


def test_mmrag_ground_prints_the_box_or_one_line(tmp_path: Path, tiny_owlv2: Path):
    photo = tmp_path / "street.jpg"
    photo.write_bytes(jpeg_bytes("gray", (240, 160)))
    args = ("ground", "--image", str(photo), "--question", "What do we drive?")
    found = run_mmrag(*args, "--detector", str(tiny_owlv2), "--json")
    assert found.returncode == 0, found.stderr
    body = json.loads(found.stdout)
    assert within(body["box"], 240, 160) and body["strategy"] == "detector"

    assert_one_line_error(run_mmrag(*args), "no detector configured", "--detector NAME_OR_PATH")
    not_image = tmp_path / "notes.jpg"
    not_image.write_text("not an image")
    refused = run_mmrag("ground", "--image", str(not_image), "--question", "Q?")
    assert_one_line_error(refused, "undecodable image")
    vlm = run_mmrag(*args, "--grounder", "vlm")  # the embedded SmolLM2 sees no images
    assert_one_line_error(vlm, "--grounder vlm needs an engine that sees images")
