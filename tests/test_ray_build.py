"""Index builds on a real two-node Ray cluster, held against the local build of the same corpus.

The cluster is the `cluster` fixture (tests/conftest.py): a head and a worker node, each with
its own raylet and object store and one CPU, so the actor pools span both nodes. Builds go
through the real CLI (`mmrag index build --executor ray --ray-address ...`) with the packaged
MiniLM and PP-OCR. Ray runs in its single-machine mode (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0),
where every node and driver binds 127.0.0.1: these tests send nothing beyond loopback.
"""

from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import numpy as np
import pytest

from mmrag.indexes.collection import Collection
from tests.helpers import (
    MMRAG,
    SAMPLE,
    SAMPLE_JSON,
    assert_one_line_error,
    free_port,
    lose_node_when,
    run_mmrag,
    run_on_loopback,
    start_on_loopback,
    two_node_cluster,
    wait_until,
)

SAMPLE_INPUTS = ["--corpus", str(SAMPLE_JSON), "--images", str(SAMPLE / "imgs.tsv")]


@pytest.fixture(scope="module")
def local_index(tmp_path_factory: pytest.TempPathFactory, hybrid_index: Path) -> Path:
    """The local build, its images read once already (the hybrid index's OCR cache): what the
    cluster's OCR actors read is held against what this machine read."""
    out = tmp_path_factory.mktemp("local") / "index"
    cache = ["--ocr-cache", str(hybrid_index.with_name("ocr-cache.jsonl"))]
    result = run_mmrag(
        "index", "build", *SAMPLE_INPUTS, "--out", str(out), "--ocr", *cache, "--quiet"
    )
    assert result.returncode == 0, result.stderr
    assert "(0 read, 129 cached" in result.stdout
    return out


def cluster_build(cluster: str, out: Path, *flags: str) -> list[str]:
    return [
        *MMRAG,
        "index",
        "build",
        *SAMPLE_INPUTS,
        "--out",
        str(out),
        "--executor",
        "ray",
        "--ray-address",
        cluster,
        "--quiet",
        *flags,
    ]


def assert_same_search_results(local: Collection, built: Collection, questions, minilm) -> None:
    """Same sources, same top-10 of every list for every sample question, vectors within 1e-5."""
    assert len(built.store) == len(local.store)
    assert [built.store.get(row) for row in range(len(built.store))] == [
        local.store.get(row) for row in range(len(local.store))
    ]
    assert built.dense_components.keys() == local.dense_components.keys()
    texts = [question.question for question in questions]
    query_vectors = minilm.encode_texts(texts)
    for name in local.dense_components:
        mine, theirs = built.dense(name), local.dense(name)
        np.testing.assert_array_equal(mine.rows, theirs.rows)
        assert (
            np.abs(
                mine.index.reconstruct_n(0, len(mine)) - theirs.index.reconstruct_n(0, len(theirs))
            ).max()
            < 1e-5
        )
        np.testing.assert_array_equal(
            mine.search(query_vectors, 10)[0], theirs.search(query_vectors, 10)[0]
        )
    for text in texts:
        assert built.bm25.search(text, 10)[0].tolist() == local.bm25.search(text, 10)[0].tolist()
        if local.ocr_bm25 is not None:
            assert (
                built.ocr_bm25.search(text, 10)[0].tolist()
                == local.ocr_bm25.search(text, 10)[0].tolist()
            )


def test_a_two_node_cluster_builds_the_index_the_local_build_makes(
    cluster: str, local_index: Path, tmp_path: Path, sample_questions, minilm
):
    out = tmp_path / "index"
    result = run_on_loopback(cluster_build(cluster, out, "--ocr", "--ray-batch-size", "16"))
    assert result.returncode == 0, result.stderr[-3000:]
    maps = "ocr, text-image vectors, text-text vectors, text-ocr vectors"
    assert f"ray: 2 nodes, 2 CPUs, 0 GPUs; {maps} on the cluster" in result.stdout
    local, built = Collection(local_index), Collection(out)  # every file verified at load
    assert built.ocr["images_with_text"] == local.ocr["images_with_text"] > 0
    for row in local.store.rows_with_ocr():
        assert built.store.ocr_lines(int(row)) == local.store.ocr_lines(int(row))
    assert_same_search_results(local, built, sample_questions, minilm)
    assert not (tmp_path / "index.ray-work").exists()  # finished batches go once committed


def test_an_interrupted_cluster_build_resumes_from_its_finished_batches(
    cluster: str, local_index: Path, tmp_path: Path, sample_questions, minilm
):
    out, work = tmp_path / "index", tmp_path / "index.ray-work"
    command = cluster_build(cluster, out, "--ocr", "--ray-batch-size", "4")
    build = start_on_loopback(command)
    wait_until(build, lambda: len(list(work.glob("*/part-*.npz"))) >= 6)
    build.send_signal(signal.SIGKILL)
    build.wait(30)
    finished = len(list(work.glob("*/part-*.npz")))
    assert not out.exists()  # nothing half-written where the index goes

    result = run_on_loopback(command)
    assert result.returncode == 0, result.stderr[-3000:]
    reused = re.search(r"(\d+) of (\d+) items taken from an interrupted build", result.stdout)
    assert reused, result.stdout
    assert int(reused.group(1)) >= 4 * finished - 3  # every finished batch, the last maybe short
    built = Collection(out)
    # The OCR map runs first: its finished batches count as cached, not as read again.
    assert built.ocr["cached"] > 0
    assert built.ocr["cached"] + built.ocr["read"] + built.ocr["unreadable"] == built.ocr["images"]
    assert_same_search_results(Collection(local_index), built, sample_questions, minilm)
    assert not work.exists()


def test_a_corpus_without_images_builds_on_the_cluster_as_it_does_here(
    cluster: str, tmp_path: Path
):
    """A map with nothing to map (no image captions to embed) is an empty list, not an error."""
    corpus = tmp_path / "snippets.jsonl"
    snippets = [f"snippet {n} about the harbour inn and its {n} doors" for n in range(40)]
    corpus.write_text(
        "".join(
            json.dumps({"id": f"t{n}", "modality": "text", "title": f"Snippet {n}", "text": text})
            + "\n"
            for n, text in enumerate(snippets)
        )
    )
    inputs = ["index", "build", "--corpus", str(corpus), "--quiet"]
    local = run_mmrag(*inputs, "--out", str(tmp_path / "local"))
    assert local.returncode == 0, local.stderr
    on_cluster = run_on_loopback(
        [
            *MMRAG,
            *inputs,
            "--out",
            str(tmp_path / "ray"),
            "--executor",
            "ray",
            "--ray-address",
            cluster,
        ]
    )
    assert on_cluster.returncode == 0, on_cluster.stderr[-3000:]
    mine, theirs = Collection(tmp_path / "ray"), Collection(tmp_path / "local")
    assert len(mine.dense("text-image")) == len(theirs.dense("text-image")) == 0
    text, local_text = mine.dense("text-text"), theirs.dense("text-text")
    difference = text.index.reconstruct_n(0, 40) - local_text.index.reconstruct_n(0, 40)
    assert np.abs(difference).max() < 1e-5


def test_an_unreachable_cluster_is_one_line_at_once(tmp_path: Path):
    address = f"127.0.0.1:{free_port()}"
    result = run_mmrag(
        "index",
        "build",
        *SAMPLE_INPUTS,
        "--out",
        str(tmp_path / "i"),
        "--executor",
        "ray",
        "--ray-address",
        address,
    )
    assert_one_line_error(result, "cannot reach the Ray cluster at", address)
    assert not (tmp_path / "i").exists()


def test_asking_for_gpus_a_cluster_lacks_is_one_line(cluster: str, tmp_path: Path):
    result = run_on_loopback(cluster_build(cluster, tmp_path / "i", "--device", "cuda"))
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr
    assert "--device cuda: the Ray cluster has no GPU (2 nodes, 2 CPUs)" in last, result.stderr
    assert not (tmp_path / "i").exists()


@pytest.mark.slow
def test_a_worker_node_that_dies_mid_build_loses_nothing(
    local_index: Path, tmp_path: Path, sample_questions, minilm
):
    """A cluster of its own, since a node goes: the pool goes on with the actors left."""
    out, work = tmp_path / "index", tmp_path / "index.ray-work"
    with two_node_cluster() as (nodes, worker):
        command = cluster_build(nodes.address, out, "--ray-batch-size", "4")
        build = start_on_loopback(command)

        def batches_done() -> bool:
            return len(list(work.glob("*/part-*.npz"))) >= 4

        stdout, stderr = lose_node_when(nodes, worker, build, batches_done)
    assert build.returncode == 0, stderr[-3000:]
    assert "indexed 339 sources" in stdout
    built, local = Collection(out), Collection(local_index)
    queries = minilm.encode_texts([question.question for question in sample_questions])
    for name in ("text-image", "text-text"):
        mine, theirs = built.dense(name), local.dense(name)
        difference = mine.index.reconstruct_n(0, len(mine)) - theirs.index.reconstruct_n(
            0, len(theirs)
        )
        assert np.abs(difference).max() < 1e-5
        np.testing.assert_array_equal(mine.search(queries, 10)[0], theirs.search(queries, 10)[0])
