"""Text embeddings on onnxruntime (the query path: no torch) against sentence-transformers, the
export cache, and what a question's path imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mmrag.indexes.collection import Collection, build_index
from mmrag.indexes.corpus import read_corpus
from mmrag.indexes.encoders import onnx_text
from mmrag.indexes.encoders.onnx_text import OnnxSentenceEncoder, load_onnx_encoder
from mmrag.indexes.encoders.text import SentenceTransformerEncoder, resolve_text_embedder
from mmrag.indexes.errors import IndexFormatError
from mmrag.retrieval.hybrid import HybridRetriever
from tests.helpers import REPO, SAMPLE, SAMPLE_JSON
from tests.tiny_models import tiny_sentence_transformer

HEAVY = ("torch", "sentence_transformers", "transformers", "sklearn", "ray", "fastapi")


def cosines(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    return np.sum(first * second, axis=1)


@pytest.fixture(scope="module")
def minilm_on_torch() -> SentenceTransformerEncoder:
    return SentenceTransformerEncoder("sentence-transformers/all-MiniLM-L6-v2", device="cpu")


def test_minilm_on_onnx_embeds_and_ranks_the_sample_as_sentence_transformers(
    minilm, minilm_on_torch, hybrid_index: Path, sample_questions, monkeypatch
):
    assert isinstance(minilm, OnnxSentenceEncoder)
    texts = [source.search_text for source in read_corpus([SAMPLE_JSON])]
    texts += [question.question for question in sample_questions]
    fast, reference = minilm.encode_texts(texts), minilm_on_torch.encode_texts(texts)
    assert cosines(fast, reference).min() >= 0.9999

    questions = [question.question for question in sample_questions]
    on_onnx = HybridRetriever(Collection(hybrid_index))
    ranked = [[c.source.id for c in on_onnx.search(q, 10)] for q in questions]
    monkeypatch.setattr("mmrag.retrieval.hybrid.encoder_for", lambda *_: minilm_on_torch)
    on_torch = HybridRetriever(Collection(hybrid_index))
    assert ranked == [[c.source.id for c in on_torch.search(q, 10)] for q in questions]


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    return cache / "mmrag" / "onnx"


def test_a_sentence_transformers_folder_is_exported_once_checked_and_cached(
    tmp_path: Path, own_cache: Path, monkeypatch
):
    folder = tiny_sentence_transformer(tmp_path / "tiny")
    texts = ["a red door", "what is the tower made of?", ""]
    fast = load_onnx_encoder("tiny", folder)
    assert isinstance(fast, OnnxSentenceEncoder)
    reference = SentenceTransformerEncoder(str(folder), device="cpu").encode_texts(texts)
    assert cosines(fast.encode_texts(texts), reference).min() >= 0.9999
    (export,) = own_cache.iterdir()
    meta = json.loads((export / "meta.json").read_text())
    assert meta["agrees"] and meta["agreement"] >= onnx_text.AGREEMENT and meta["dim"] == 32

    with monkeypatch.context() as patch:
        patch.setattr(onnx_text, "_to_onnx", lambda _layout: pytest.fail("exported again"))
        again = load_onnx_encoder("tiny", folder)
    assert again is not None
    assert np.array_equal(again.encode_texts(texts), fast.encode_texts(texts))

    # A cached graph altered on disk fails its checksum and is made anew.
    model = export / "model.onnx"
    model.write_bytes(model.read_bytes()[:-100] + bytes(100))
    remade = load_onnx_encoder("tiny", folder)
    assert remade is not None
    assert cosines(remade.encode_texts(texts), reference).min() >= 0.9999


def test_models_the_export_cannot_reproduce_stay_on_sentence_transformers(
    tmp_path: Path, own_cache: Path, monkeypatch
):
    with_dense = tiny_sentence_transformer(tmp_path / "dense", dense=True)
    assert load_onnx_encoder("dense", with_dense) is None
    assert not own_cache.exists()  # not even tried

    # An export that embeds differently is refused once, remembered, and not tried again.
    folder = tiny_sentence_transformer(tmp_path / "tiny")
    monkeypatch.setattr(onnx_text, "AGREEMENT", 1.5)
    assert load_onnx_encoder("tiny", folder) is None
    (export,) = own_cache.iterdir()
    meta = json.loads((export / "meta.json").read_text())
    assert not meta["agrees"] and "cosine" in meta["why"]
    assert not (export / "model.onnx").exists()
    monkeypatch.setattr(onnx_text, "_to_onnx", lambda _layout: pytest.fail("tried again"))
    assert load_onnx_encoder("tiny", folder) is None


def test_an_index_refuses_an_onnx_query_encoder_that_embeds_differently(
    tiny_webqa, tmp_path: Path, own_cache: Path
):
    built_with = tiny_sentence_transformer(tmp_path / "a", seed=0)
    out = tmp_path / "idx"
    encoder = load_onnx_encoder(str(built_with), built_with)
    build_index([tiny_webqa["json"]], out, text_embedder=encoder)
    other = tiny_sentence_transformer(tmp_path / "b", seed=1)  # same shape, other weights
    manifest = json.loads((out / "manifest.json").read_text())
    for entry in manifest["components"].values():
        if "encoder" in entry:
            entry["encoder"]["name"] = str(other)
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match="embeds differently"):
        HybridRetriever(Collection(out), ["text"], "rrf")


# One process runs what `make serve` runs, then a search and a question: none of it may load
# torch (2-9 s to import on 2 cores) or anything else a question does not need.
COMMANDS = """
import json, sys
from mmrag.service.cli import main
codes = [main(command) for command in json.loads(sys.argv[1])]
print(json.dumps({"codes": codes, "imported": sorted(set(sys.argv[2:]) & set(sys.modules))}))
"""


def test_build_calibrate_search_and_ask_on_the_default_index_import_no_torch(
    hybrid_index: Path, tmp_path: Path
):
    out = tmp_path / "index"
    question = "What color is the door of the Harbor Inn?"
    ocr_cache = hybrid_index.with_name("ocr-cache.jsonl")  # the images were read once already
    inputs = ["--corpus", str(SAMPLE_JSON), "--images", str(SAMPLE / "imgs.tsv")]
    commands = [
        ["index", "build", *inputs, "--out", str(out), "--ocr", "--ocr-cache", str(ocr_cache)],
        ["retrieval", "calibrate", "--index", str(out), "--questions", str(SAMPLE_JSON)],
        ["search", question, "--index", str(out)],
        ["ask", question, "--index", str(out)],
    ]
    assert Path(resolve_text_embedder("all-MiniLM-L6-v2")).is_dir()  # the packaged copy
    done = subprocess.run(
        [sys.executable, "-c", COMMANDS, json.dumps(commands), *HEAVY],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"codes": [0, 0, 0, 0], "imported": []}, done.stderr
    assert "Harbor Inn" in done.stdout
