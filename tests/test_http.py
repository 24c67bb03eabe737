"""The HTTP API: through the ASGI app, and through a real uvicorn process on loopback."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from mmrag.core.settings import Settings
from mmrag.service.app import create_app
from tests.helpers import running_mmrag_server


@pytest.fixture
def client(sample_index: Path) -> Iterator[TestClient]:
    with TestClient(
        create_app(Settings(index=sample_index, max_question_chars=200))
    ) as test_client:
        yield test_client


def test_healthz_reports_the_loaded_index(client: TestClient, sample_index: Path):
    body = client.get("/healthz").json()
    assert body["status"] == "ok"
    assert body["sources"] >= 300
    assert body["retrievers"] == ["bm25"] and body["fusion"] == "raw"
    assert "images are reached through their captions" in body["image_vectors"]


def test_search_returns_gold_sources_for_sample_questions(client: TestClient, sample_questions):
    answered = 0
    for question in sample_questions:
        response = client.post("/v1/search", json={"question": question.question, "k": 5})
        assert response.status_code == 200
        ids = [hit["source_id"] for hit in response.json()["hits"]]
        answered += any(gold in ids for gold in question.gold_source_ids)
    # BM25 over title + caption/snippet finds gold for all 62 today; a little slack for edits.
    assert answered / len(sample_questions) >= 0.95


def test_modality_filter(client: TestClient):
    response = client.post("/v1/search", json={"question": "door", "k": 8, "modality": "image"})
    hits = response.json()["hits"]
    assert hits and {hit["modality"] for hit in hits} == {"image"}


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"question": "   "}, "question must not be empty"),
        ({"question": "x" * 201}, "longer than 200 characters"),
        ({"question": "door", "k": 0}, "greater than or equal to 1"),
        ({"question": "door", "k": 101}, "k must be at most 100"),
        ({"question": "door", "modality": "video"}, "'all', 'image' or 'text'"),
        ({"k": 3}, "Field required"),
    ],
)
def test_bad_requests_get_422_with_a_message(client: TestClient, body, fragment):
    response = client.post("/v1/search", json=body)
    assert response.status_code == 422
    assert fragment in response.text


def test_malformed_json_is_a_4xx(client: TestClient):
    response = client.post(
        "/v1/search", content=b'{"question": ', headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert "JSON decode error" in response.text


def test_real_uvicorn_process_serves_search(sample_index: Path, sample_questions, tmp_path):
    with running_mmrag_server(sample_index, tmp_path / "uvicorn.log") as base:
        question = next(q for q in sample_questions if q.qcate == "text")
        response = httpx.post(f"{base}/v1/search", json={"question": question.question, "k": 5})
        assert response.status_code == 200
        assert response.json()["took_ms"] > 0
        ids = [hit["source_id"] for hit in response.json()["hits"]]
        assert set(question.gold_source_ids) & set(ids)


def test_source_by_id_and_its_image(client: TestClient):
    body = client.get("/v1/sources/30000006").json()
    assert body["modality"] == "image" and body["image_url"] == "/v1/sources/30000006/image"
    image = client.get(body["image_url"])
    assert image.status_code == 200 and image.headers["content-type"] == "image/jpeg"
    assert image.content[:2] == b"\xff\xd8"
    truncated = client.get("/v1/sources/30000028/image")  # served as stored, truncated or not
    assert truncated.status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        "/v1/sources/nope",
        "/v1/sources/nope/image",
        "/v1/sources/..%2F..%2Fetc%2Fpasswd/image",
        "/v1/sources/%2Fetc%2Fpasswd/image",
        "/v1/sources/39999999/image",
    ],
)
def test_unknown_ids_and_path_tricks_are_404(client: TestClient, path: str):
    response = client.get(path)
    assert response.status_code == 404
    assert "root:" not in response.text and response.headers["content-type"] == "application/json"


def test_a_long_unknown_id_is_not_sent_back_whole(client: TestClient):
    """Issue 30, finding 9: a 404 for `/v1/sources/<5,000 digits>` echoed all 5,000."""
    for path in ("/v1/sources/{}", "/v1/sources/{}/image"):
        response = client.get(path.format("7" * 5000))
        detail = response.json()["detail"]
        assert response.status_code == 404 and len(detail) < 200, detail
        assert "5,000 characters" in detail


def test_a_text_source_has_no_image(client: TestClient, sample_questions):
    snippet = next(q for q in sample_questions if q.qcate == "text").gold_source_ids[0]
    assert client.get(f"/v1/sources/{snippet}").json()["image_url"] is None
    assert client.get(f"/v1/sources/{snippet}/image").status_code == 404


def test_settings_travel_to_worker_processes_through_the_environment(monkeypatch):
    settings = Settings(
        index=Path("/srv/index"),
        retrievers=["bm25", "text"],
        threshold=0.35,
        cors_origins=["https://example.org"],
        workers=2,
        torch_threads=1,
    )
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    assert Settings() == settings


def test_two_worker_processes_serve(sample_index: Path, tmp_path):
    log = tmp_path / "uvicorn.log"
    with running_mmrag_server(sample_index, log, "--workers", "2") as base:
        deadline = time.monotonic() + 60  # the second worker may still be loading
        while log.read_text().count("Application startup complete") < 2:
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.2)
        responses = [
            httpx.post(f"{base}/v1/search", json={"question": "Harbor Inn door"}) for _ in range(6)
        ]
    assert all(r.status_code == 200 and r.json()["hits"] for r in responses)
