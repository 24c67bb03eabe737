"""Images reach an OpenAI-compatible VLM: the README's own TOML configuration, with `vision =
true`, sends every image source (to the answer writer and the LM judge) and every uploaded
image as `image_url` data parts, byte for byte; without it, images are described in text.

The server is tests/openai_recorder.py: a real HTTP server on loopback that records requests,
since no VLM server can run here (no vision-language weights are reachable from these
machines); the CLI runs as a user runs it, in a subprocess.
"""

from __future__ import annotations

import base64
from pathlib import Path

from mmrag.indexes.images import WebQAImageStore
from tests.helpers import SAMPLE, jpeg_bytes, run_mmrag
from tests.openai_recorder import image_urls, recording_server

QUESTION = "What color is the door of the Harbor Inn?"


def readme_config(tmp_path: Path, index: Path, url: str, *extra: str) -> Path:
    """The README's TOML example, pointed at the recording server."""
    config = tmp_path / "mmrag.toml"
    lines = [
        f'index = "{index}"',
        'engine = "openai"',
        f'engine_url = "{url}"',
        'model = "Qwen/Qwen2.5-VL-7B-Instruct"',
        "max_sources = 2",
        "request_timeout_s = 20",
        *extra,
    ]
    config.write_text("\n".join(lines) + "\n")
    return config


def decoded(url: str) -> bytes:
    header, _, payload = url.partition(",")
    assert header.startswith("data:image/") and header.endswith(";base64")
    return base64.b64decode(payload)


def ask(config: Path, index: Path) -> dict:
    import json

    result = run_mmrag(
        "ask", QUESTION, "--index", str(index), "--config", str(config), "--json",
        "--reranker", "lm-judge",
    )  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    return json.loads(result.stdout)


def test_with_vision_image_sources_reach_the_writer_and_the_judge(sample_index, tmp_path):
    store = WebQAImageStore(SAMPLE / "imgs.tsv")
    with recording_server() as server:
        response = ask(
            readme_config(tmp_path, sample_index, server.url, "vision = true"), sample_index
        )
        requests = server.chat_requests()
    images = [s["source_id"] for s in response["sources"] if s["modality"] == "image"]
    assert images, response["sources"]
    (answer,) = [body for body in requests if body.get("stream")]
    assert answer["model"] == "Qwen/Qwen2.5-VL-7B-Instruct"
    assert [decoded(url) for url in image_urls(answer)] == [store.read_bytes(i) for i in images]
    text = " ".join(
        part["text"] for part in answer["messages"][-1]["content"] if part["type"] == "text"
    )
    assert "(image caption)" in text  # the caption still comes with the pixels
    judged = [body for body in requests if body.get("logprobs")]
    sent = [decoded(url) for body in judged for url in image_urls(body)]
    assert all(len(image_urls(body)) <= 1 for body in judged)
    assert {store.read_bytes(i) for i in images} <= set(sent)  # the judge saw each image


def test_without_vision_images_are_described_in_text(sample_index, tmp_path):
    with recording_server() as server:
        response = ask(readme_config(tmp_path, sample_index, server.url), sample_index)
        requests = server.chat_requests()
    assert any(s["modality"] == "image" for s in response["sources"])
    assert requests and all(not image_urls(body) for body in requests)
    assert all(isinstance(m["content"], str) for body in requests for m in body["messages"])
    (answer,) = [body for body in requests if body.get("stream")]
    assert "(image caption)" in answer["messages"][-1]["content"]


def test_an_uploaded_image_reaches_the_vlm(tmp_path):
    photo = tmp_path / "door.jpg"
    photo.write_bytes(jpeg_bytes("red", (64, 48)))
    with recording_server(lambda _body: "The door is red.") as server:
        result = run_mmrag(
            "rationale", "--image", str(photo), "--question", QUESTION, "--engine", "openai",
            "--base-url", server.url, "--vision", "--choices", "red", "blue",
            "--choose", "likelihood", "--json",
        )  # fmt: skip
        requests = server.chat_requests()
    assert result.returncode == 0, result.stderr
    assert len(requests) == 3  # rationale, direct answer, option letter
    assert all([decoded(url) for url in image_urls(body)] == [photo.read_bytes()]
               for body in requests)  # fmt: skip
