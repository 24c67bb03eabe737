"""The QA service under normal use, load and faults, through the ASGI app."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from mmrag.core.components import build_pipeline
from mmrag.core.settings import Settings
from mmrag.service.app import create_app
from tests.helpers import assert_one_line_error, run_mmrag, running_llama_server

QUESTION = "What color is the door of the Harbor Inn?"


@pytest.fixture(scope="module")
def pipeline(hybrid_index: Path):
    """Built once: every app below shares the loaded models, as one process would."""
    return build_pipeline(Settings(index=hybrid_index))


def client_for(pipeline, **settings) -> TestClient:
    return TestClient(
        create_app(Settings(index=pipeline.retriever.collection.root, **settings), pipeline)
    )


def parse_events(text: str) -> list[tuple[str, dict]]:
    events = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((fields["event"], json.loads(fields["data"])))
    return events


def test_answer_returns_a_cited_sentence_and_its_sources(pipeline):
    with client_for(pipeline) as client:
        body = client.post("/v1/answer", json={"question": QUESTION}).json()
    assert body["generation_error"] is None
    assert body["citations"] and body["answer"].endswith((".", "!", "?"))
    cited = {c["source_id"] for c in body["citations"]}
    assert cited <= {s["source_id"] for s in body["sources"]}
    assert all(0 <= s["score"] <= 1 for s in body["sources"])
    assert set(body["timings"]) >= {"retrieve_s", "rerank_s", "generate_s"}


def test_answer_streams_tokens_then_the_final_answer(pipeline):
    with client_for(pipeline) as client:
        response = client.post("/v1/answer", json={"question": QUESTION, "stream": True})
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse_events(response.text)
    kinds = [kind for kind, _ in events]
    assert kinds[-1] == "answer" and kinds.count("answer") == 1
    assert "token" in kinds and set(kinds[:-1]) == {"token"}
    streamed = "".join(data["text"] for kind, data in events if kind == "token")
    final = events[-1][1]
    assert final["citations"] and streamed.strip()


def test_max_sources_per_request(pipeline):
    with client_for(pipeline) as client:
        body = client.post("/v1/answer", json={"question": QUESTION, "max_sources": 1}).json()
    assert len(body["sources"]) == 1


def test_oversize_bodies_get_413_by_length_and_when_chunked(pipeline):
    with client_for(pipeline, max_body_bytes=2048) as client:
        big = {"question": "door " * 1000}
        response = client.post("/v1/answer", json=big)
        assert response.status_code == 413
        assert response.json()["detail"] == "request body larger than 2048 bytes"

        def chunks():
            yield b'{"question": "'
            for _ in range(100):
                yield b"door " * 10
            yield b'"}'

        chunked = client.post(
            "/v1/search", content=chunks(), headers={"content-type": "application/json"}
        )
        assert chunked.status_code == 413


def test_long_questions_get_422_naming_the_limit(pipeline):
    with client_for(pipeline, max_question_chars=50) as client:
        response = client.post("/v1/answer", json={"question": "door " * 20})
    assert response.status_code == 422 and "longer than 50 characters" in response.text


def test_a_full_queue_answers_429_with_retry_after(pipeline):
    app = create_app(
        Settings(index=pipeline.retriever.collection.root, answer_concurrency=1, answer_queue=0),
        pipeline,
    )

    async def burst() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            app.state.pipeline = pipeline  # ASGITransport runs no lifespan
            return await asyncio.gather(
                *(client.post("/v1/answer", json={"question": QUESTION}) for _ in range(4))
            )

    responses = asyncio.run(burst())
    codes = sorted(r.status_code for r in responses)
    assert codes.count(200) >= 1 and codes.count(429) >= 1, codes
    refused = next(r for r in responses if r.status_code == 429)
    assert refused.headers["retry-after"] == "1" and "at capacity" in refused.json()["detail"]


def test_generation_past_the_deadline_returns_the_sources(pipeline):
    with client_for(pipeline, request_timeout_s=0.001) as client:
        body = client.post("/v1/answer", json={"question": QUESTION}).json()
    assert body["generation_error"] == "timed out after 0.001 s"
    assert body["sources"] and body["answer"] == ""


def test_metrics_count_requests_and_time_each_stage(pipeline):
    with client_for(pipeline) as client:
        client.post("/v1/search", json={"question": QUESTION})
        client.post("/v1/answer", json={"question": QUESTION})
        client.get("/v1/sources/nope")
        text = client.get("/metrics").text
    assert 'mmrag_requests_total{route="/v1/search",status="200"} 1.0' in text
    assert 'mmrag_requests_total{route="/v1/sources/{source_id}",status="404"} 1.0' in text
    for stage in ("retrieve", "rerank", "generate"):
        assert f'mmrag_stage_seconds_count{{stage="{stage}"}}' in text


def test_cors_is_off_by_default_and_configurable(pipeline):
    preflight = {"origin": "http://example.org", "access-control-request-method": "POST"}
    with client_for(pipeline) as client:
        assert (
            "access-control-allow-origin"
            not in client.options("/v1/search", headers=preflight).headers
        )
    with client_for(pipeline, cors_origins=["http://example.org"]) as client:
        response = client.options("/v1/search", headers=preflight)
    assert response.headers["access-control-allow-origin"] == "http://example.org"


def test_openapi_schema_is_published(pipeline):
    with client_for(pipeline) as client:
        paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/answer", "/v1/search", "/v1/sources/{source_id}", "/healthz", "/readyz"} <= set(
        paths
    )


def test_bad_config_file_is_one_line(tmp_path: Path, hybrid_index: Path):
    config = tmp_path / "mmrag.toml"
    config.write_text("max_sources = 0\n")
    assert_one_line_error(
        run_mmrag("serve", "--index", str(hybrid_index), "--config", str(config)),
        "mmrag.toml: invalid settings (max_sources: Input should be greater",
    )
    config.write_text("max_sources = [")
    assert_one_line_error(
        run_mmrag("ask", "q", "--index", str(hybrid_index), "--config", str(config)),
        "not valid TOML",
    )


def test_a_generator_that_goes_down_degrades_to_sources_and_unready(
    hybrid_index: Path, smollm2_gguf: Path, tmp_path: Path
):
    """A real llama.cpp server behind the openai engine, stopped mid-service: no mock."""
    with running_llama_server(smollm2_gguf, tmp_path / "server.log") as (server, base_url):
        settings = Settings(
            index=hybrid_index, engine="openai", model="smollm2", engine_url=base_url
        )
        with TestClient(create_app(settings)) as client:
            ready = client.get("/readyz")
            assert ready.status_code == 200
            assert ready.json()["engine"] == "openai" and ready.json()["engine_reachable"]
            up = client.post("/v1/answer", json={"question": QUESTION}).json()
            assert up["generation_error"] is None and up["citations"]

            server.terminate()
            server.wait(timeout=10)
            assert client.get("/readyz").status_code == 503
            down = client.post("/v1/answer", json={"question": QUESTION})
            assert down.status_code == 200
            body = down.json()
            assert "cannot reach" in body["generation_error"]
            assert body["sources"] and body["answer"] == "" and body["citations"] == []
            assert client.get("/healthz").status_code == 200  # alive, just not ready


def test_rationale_from_an_upload_and_from_a_corpus_image(pipeline):
    from mmrag.indexes.images import WebQAImageStore
    from tests.helpers import SAMPLE

    door = WebQAImageStore(SAMPLE / "imgs.tsv").read_bytes("30000006")
    form = {
        "question": "What color is the door?",
        "choices": ["red", "blue", "green"],
        "caption": "A wooden door painted blue.",
    }
    with client_for(pipeline) as client:
        upload = client.post(
            "/v1/rationale", data=form, files={"image": ("door.jpg", door, "image/jpeg")}
        )
        assert upload.status_code == 200, upload.text
        body = upload.json()
        assert body["rationale"] and body["direct_answer"]
        assert body["multiple_choice"] in form["choices"]
        from_corpus = client.post("/v1/rationale", data={**form, "source_id": "30000006"})
        assert from_corpus.status_code == 200 and from_corpus.json()["direct_answer"]

        neither = client.post("/v1/rationale", data=form)
        assert neither.status_code == 422 and "exactly one of" in neither.text
        junk = client.post(
            "/v1/rationale", data=form, files={"image": ("x.jpg", b"not an image", "image/jpeg")}
        )
        assert junk.status_code == 422 and "undecodable image" in junk.text
        text_source = client.post("/v1/rationale", data={**form, "source_id": "../../etc"})
        assert text_source.status_code == 404
        # Option letters run A to Z: a 27th choice was a 500 after the rationale was written.
        many = {**form, "choices": [f"option {n}" for n in range(27)], "choose": "likelihood"}
        refused = client.post("/v1/rationale", data={**many, "source_id": "30000006"})
        assert refused.status_code == 422
        assert refused.json()["detail"] == "at most 26 choices (A to Z), got 27"


def test_streams_over_capacity_get_429_not_an_error_event(pipeline):
    """Admission happens before the stream's 200: a refused stream is a status code."""
    app = create_app(
        Settings(index=pipeline.retriever.collection.root, answer_concurrency=1, answer_queue=0),
        pipeline,
    )
    body = {"question": QUESTION, "stream": True}

    async def burst() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            app.state.pipeline = pipeline  # ASGITransport runs no lifespan
            return await asyncio.gather(*(client.post("/v1/answer", json=body) for _ in range(4)))

    responses = asyncio.run(burst())
    codes = sorted(r.status_code for r in responses)
    assert codes.count(200) >= 1 and codes.count(429) >= 1, codes
    for response in responses:
        if response.status_code == 200:
            assert [kind for kind, _ in parse_events(response.text)][-1] == "answer"
        else:
            assert response.headers["retry-after"] == "1"
    assert app.state.answer_queue.admitted == 0  # every slot was given back


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"question": QUESTION, "k": 1_000_000_000}, "k must be at most 100"),
        ({"question": QUESTION, "max_sources": 1_000_000_000}, "max_sources must be at most 8"),
        ({"question": QUESTION, "stream": True, "k": 101}, "k must be at most 100"),
    ],
)
def test_answer_work_per_request_is_bounded(pipeline, body, fragment):
    with client_for(pipeline) as client:
        response = client.post("/v1/answer", json=body)
    assert response.status_code == 422 and fragment in response.json()["detail"]


@pytest.mark.parametrize("route", ["/v1/search", "/v1/answer"])
@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b'{"question": "door \\ud800 inn"}', "lone surrogate"),
        (b'{"question": "door", "k": 1e400}', "k: Input should be a finite number"),
        (b'{"question": "door", "k": NaN}', "k: Input should be a finite number"),
        (b'{"question": ["door"]}', "question: Input should be a valid string"),
        (b'{"question": "door", "k": true}', "k: Input should be a valid integer"),
        (b'{"question": "door", "k": "3"}', "k: Input should be a valid integer"),
    ],
)
def test_unencodable_and_infinite_inputs_are_422_with_one_line(pipeline, route, raw, fragment):
    with client_for(pipeline) as client:
        response = client.post(route, content=raw, headers={"content-type": "application/json"})
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail and fragment in detail, detail


def test_answer_takes_json_strictly_and_only_as_json(pipeline):
    """A cross-site form can post text/plain without a CORS preflight, and was answered as
    JSON; `"stream": "yes"` streamed. A form with an image still sends its fields as text."""
    body = json.dumps({"question": QUESTION})
    with client_for(pipeline) as client:
        plain = client.post("/v1/answer", content=body, headers={"content-type": "text/plain"})
        assert plain.status_code == 422
        assert plain.json()["detail"].startswith("body: send JSON (Content-Type: application/json)")
        loose = client.post("/v1/answer", json={"question": QUESTION, "stream": "yes"})
        assert loose.status_code == 422 and "stream" in loose.json()["detail"]
        typed = client.post(
            "/v1/answer", content=body, headers={"content-type": "application/json; charset=utf-8"}
        )
        assert typed.status_code == 200, typed.text


def test_413_carries_cors_headers(pipeline):
    origin = {"origin": "http://example.org"}
    with client_for(pipeline, max_body_bytes=2048, cors_origins=["http://example.org"]) as client:
        response = client.post("/v1/search", json={"question": "door " * 1000}, headers=origin)
    assert response.status_code == 413
    assert response.headers["access-control-allow-origin"] == "http://example.org"


def test_readyz_names_the_index_without_its_path(pipeline):
    with client_for(pipeline) as client:
        body = client.get("/readyz").json()
    root = pipeline.retriever.collection.root
    assert body["index"] == root.name and str(root.parent) not in str(body)


def test_docs_page_loads_nothing_from_other_hosts(pipeline):
    import re

    with client_for(pipeline) as client:
        page = client.get("/docs")
        assert page.status_code == 200
        assets = re.findall(r"""(?:src|href)=['"]([^'"]+)['"]""", page.text)
        assert assets and all(url.startswith("/") for url in assets), assets
        for url in assets:
            assert client.get(url).status_code == 200, url


def test_the_page_may_run_only_its_own_files_and_never_be_framed(pipeline):
    """Its scripts, style sheet, API and images are its own (plus the photo a user picks, a
    blob: URL); every response, errors and images included, says nosniff."""
    with client_for(pipeline) as client:
        page = client.get("/")
        policy = dict(
            directive.strip().split(" ", 1)
            for directive in page.headers["content-security-policy"].split(";")
        )
        assert policy["script-src"] == "'self'" and policy["style-src"] == "'self'"
        assert policy["frame-ancestors"] == "'none'" and page.headers["x-frame-options"] == "DENY"
        assert policy["img-src"] == "'self' blob: data:"
        for response in (page, client.get("/healthz"), client.post("/v1/search", json={})):
            assert response.headers["x-content-type-options"] == "nosniff"


def test_openapi_documents_every_status_and_the_error_shape(pipeline):
    with client_for(pipeline) as client:
        schema = client.get("/openapi.json").json()
    paths = schema["paths"]
    assert {"200", "413", "422", "429"} <= set(paths["/v1/answer"]["post"]["responses"])
    assert {"200", "413", "422", "429"} <= set(paths["/v1/search"]["post"]["responses"])
    assert "404" in paths["/v1/sources/{source_id}"]["get"]["responses"]
    assert "404" in paths["/v1/sources/{source_id}/image"]["get"]["responses"]
    error = schema["components"]["schemas"]["ErrorOut"]
    assert error["properties"]["detail"]["type"] == "string"
    # /v1/answer takes JSON or a multipart form with an image: both bodies are documented.
    bodies = paths["/v1/answer"]["post"]["requestBody"]["content"]
    for media_type in ("application/json", "multipart/form-data"):
        assert bodies[media_type]["schema"]["properties"]["question"]["minLength"] == 1
    assert "image" in bodies["multipart/form-data"]["schema"]["required"]


def png_bomb() -> bytes:
    """A 13000 x 13000 PNG of about 20 KB: 169M pixels once decoded."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("1", (13000, 13000)).save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def test_uploads_that_decode_huge_or_not_at_all_get_422_without_decoding(pipeline):
    bomb = png_bomb()
    assert len(bomb) < 64_000
    form = {"question": "What is in the picture?"}
    with client_for(pipeline) as client:
        response = client.post("/v1/rationale", data=form, files={"image": ("b.png", bomb)})
        assert response.status_code == 422
        # From the check on the header's size, made before any pixel is decoded.
        assert "13000x13000 pixels is larger than the 40,000,000" in response.json()["detail"]
        junk = client.post("/v1/rationale", data=form, files={"image": ("x.jpg", b"GIF89a junk")})
        assert junk.status_code == 422
        assert "undecodable image" in junk.text and "object at 0x" not in junk.text


def test_uploads_wait_for_admission_before_they_are_read(pipeline):
    """A full queue refuses an upload with 429 before spending anything on its pixels."""
    app = create_app(
        Settings(index=pipeline.retriever.collection.root, answer_concurrency=1, answer_queue=0),
        pipeline,
    )

    async def while_full() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            app.state.pipeline = pipeline
            ticket = await app.state.answer_queue.acquire()  # someone else's answer
            try:
                return await client.post(
                    "/v1/rationale",
                    data={"question": "What is it?"},
                    files={"image": ("b.png", png_bomb())},
                )
            finally:
                ticket.release()

    response = asyncio.run(while_full())
    assert response.status_code == 429 and response.headers["retry-after"] == "1"


def test_a_decline_is_marked_in_json_in_the_last_event_and_in_metrics(pipeline):
    question = {"question": "Who won the 1998 football world cup?"}
    with client_for(pipeline) as client:
        body = client.post("/v1/answer", json=question).json()
        assert body["abstained"] is True and body["attribution"] == "declined"
        assert body["citations"] == [] and body["sources"]
        streamed = client.post("/v1/answer", json={**question, "stream": True})
        final = parse_events(streamed.text)[-1]
        assert final[0] == "answer" and final[1]["abstained"] is True
        answered = client.post("/v1/answer", json={"question": QUESTION}).json()
        assert answered["abstained"] is False and answered["citations"]
        text = client.get("/metrics").text
    assert 'mmrag_answers_total{attribution="declined"} 2.0' in text
    assert f'mmrag_answers_total{{attribution="{answered["attribution"]}"}}' in text


def rle_bmp(width: int = 6000, height: int = 6000) -> bytes:
    """A 1 KB BMP whose header claims `width` x `height` pixels of RLE-8 data it does not hold:
    within the pixel limit, and Pillow's decoder fails with a ValueError, not an OSError."""
    import struct

    palette, payload = b"\0\0\0\0" * 256, b"\0\0" * 10
    offset = 14 + 40 + len(palette)
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 8, 1, len(payload), 0, 0, 256, 0)
    head = b"BM" + struct.pack("<IHHI", offset + len(payload), 0, 0, offset)
    return head + info + palette + payload


def test_an_image_no_decoder_can_read_is_a_422_on_every_route_and_one_line_in_the_cli(
    pipeline, tmp_path: Path
):
    """Issue 37: a 1,080-byte RLE BMP claiming 6000 x 6000 pixels reached a 500 on
    /v1/answer (only OSError was caught), a plain-text 500 on the chat route, and a traceback
    from `mmrag ask --image`."""
    import base64

    bmp = rle_bmp()
    assert len(bmp) < 2_000
    form = {"question": "What does the sign say?"}
    with client_for(pipeline) as client:
        upload = {"image": ("sign.bmp", bmp, "image/bmp")}
        for route in ("/v1/answer", "/v1/rationale"):
            response = client.post(route, data=form, files=upload)
            assert response.status_code == 422, (route, response.text)
            assert response.json()["detail"].startswith("undecodable image"), route
        url = f"data:image/bmp;base64,{base64.b64encode(bmp).decode()}"
        parts = [{"type": "text", "text": form["question"]}, {"type": "image_url"}]
        parts[1]["image_url"] = {"url": url}
        model = client.get("/v1/models").json()["data"][0]["id"]
        chat = {"model": model, "messages": [{"role": "user", "content": parts}]}
        response = client.post("/v1/chat/completions", json=chat)
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["message"].startswith("undecodable image") and error["code"] == "422"
    image = tmp_path / "sign.bmp"
    image.write_bytes(bmp)
    index = str(pipeline.retriever.collection.root)
    for command in (
        ["ask", form["question"], "--index", index],
        ["rationale", "--question", form["question"]],
        ["ground", "--question", form["question"]],
    ):
        result = run_mmrag(*command, "--image", str(image))
        assert_one_line_error(result, "undecodable image")


def test_every_error_of_the_chat_route_is_in_openais_shape(pipeline, monkeypatch):
    """Issue 37: a body over the limit on the chat route was `{"detail"}`, which OpenAI's
    clients do not read, and a failure no route expected was plain text."""
    with client_for(pipeline, max_body_bytes=2048) as client:
        model = client.get("/v1/models").json()["data"][0]["id"]
        big = {"model": model, "messages": [{"role": "user", "content": "door " * 1000}]}
        response = client.post("/v1/chat/completions", json=big)
        assert response.status_code == 413
        assert response.json() == {
            "error": {
                "message": "request body larger than 2048 bytes",
                "type": "invalid_request_error",
                "param": None,
                "code": "413",
            }
        }
        elsewhere = client.post("/v1/answer", json={"question": "door " * 1000})
        assert elsewhere.json() == {"detail": "request body larger than 2048 bytes"}

    from mmrag.service.routes import chat

    def broken(*_args):  # a bug stands in for any failure no route expects
        raise RuntimeError("a bug")

    monkeypatch.setattr(chat, "conversation_of", broken)
    app = create_app(Settings(index=pipeline.retriever.collection.root), pipeline)
    with TestClient(app, raise_server_exceptions=False) as client:
        body = {"model": model, "messages": [{"role": "user", "content": "door"}]}
        response = client.post("/v1/chat/completions", json=body)
        assert response.status_code == 500
        error = response.json()["error"]
        assert error["type"] == "server_error" and "RuntimeError" in error["message"]
        assert "a bug" not in error["message"]  # the log has it, not the client
