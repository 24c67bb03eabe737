"""faiss indexes: exact below the threshold, tuned IVF above it, round trips through disk."""

from __future__ import annotations

import numpy as np

from mmrag.indexes.dense import DenseIndex, auto_factory, exact_top10, recall_at_10
from mmrag.indexes.encoders.base import EncoderInfo

INFO = EncoderInfo(kind="text", name="test", backend="none", dim=32)


def clustered(n: int, dim: int = 32, clusters: int = 64, seed: int = 0) -> np.ndarray:
    """Embeddings cluster by topic; uniform noise would be an unrealistic worst case for IVF."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dim))
    vectors = centres[rng.integers(0, clusters, n)] + rng.normal(scale=0.3, size=(n, dim))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def test_auto_factory_switches_to_ivf_above_the_flat_limit():
    assert auto_factory(1000) == "Flat"
    assert auto_factory(930_000) == "IVF4096,Flat"


def test_flat_index_is_exact_and_maps_positions_to_store_rows():
    vectors = clustered(500)
    rows = np.arange(500) * 3 + 7  # e.g. the image rows of a mixed store
    index = DenseIndex.build(vectors, rows, INFO)
    assert index.params.factory == "Flat" and index.params.recall_at_10 == 1.0
    found_rows, scores = index.search(vectors[:5], 3)
    assert list(found_rows[:, 0]) == list(rows[:5])
    np.testing.assert_allclose(scores[:, 0], 1.0, atol=1e-5)


def test_equal_scores_rank_by_row_even_past_the_fetch_margin():
    """Duplicate captions embed identically; faiss's heap leaves their order undefined."""
    vectors = clustered(300)
    vectors[40:300:2] = vectors[0]  # 130 copies of row 0's vector, more than k + the margin
    rows = np.arange(300) + 1000
    index = DenseIndex.build(vectors, rows, INFO)
    found, scores = index.search(vectors[:1], 20)
    assert list(found[0]) == [1000, *range(1040, 1040 + 2 * 19, 2)]
    np.testing.assert_allclose(scores[0], scores[0][0], rtol=1e-6)


def test_ivf_nprobe_is_tuned_to_the_recall_target_and_survives_a_round_trip(tmp_path):
    vectors = clustered(20_000)
    index = DenseIndex.build(vectors, np.arange(20_000), INFO, factory="IVF256,Flat")
    assert index.params.recall_at_10 >= 0.95
    assert set(index.params.search) == {"nprobe"} and index.params.search["nprobe"] < 256
    index.save(tmp_path / "d", vectors)
    loaded = DenseIndex.load(tmp_path / "d")
    assert loaded.params == index.params
    queries = vectors[:50] + 0.01
    assert recall_at_10(loaded.index, vectors, queries) >= 0.9
    np.testing.assert_array_equal(loaded.search(queries, 10)[0], index.search(queries, 10)[0])
    saved = np.load(tmp_path / "d" / "vectors.npy")
    assert saved.dtype == np.float16 and saved.shape == vectors.shape


def test_exact_top10_is_the_brute_force_answer():
    vectors = clustered(300)
    queries = vectors[:4]
    brute = np.argsort(-(queries @ vectors.T), axis=1)[:, :10]
    np.testing.assert_array_equal(exact_top10(vectors, queries), brute)


def test_k_larger_than_the_index_returns_what_there_is():
    index = DenseIndex.build(clustered(3), np.array([4, 5, 6]), INFO)
    rows, _ = index.search(clustered(1, seed=1), 10)
    assert sorted(rows[0]) == [4, 5, 6]


def test_torch_exact_search_agrees_with_faiss_flat(tmp_path):
    """The GPU path (fp16 GEMM + top-k) runs the same code on CPU in float32."""
    vectors = clustered(2000)
    index = DenseIndex.build(vectors, np.arange(2000) + 100, INFO)
    index.save(tmp_path / "d", vectors)
    loaded = DenseIndex.load(tmp_path / "d")
    queries = clustered(20, seed=5)
    faiss_rows, faiss_scores = loaded.search(queries, 10)
    loaded.use_torch("cpu")
    torch_rows, torch_scores = loaded.search(queries, 10)
    # Vectors were saved as float16, so scores agree to float16 precision.
    np.testing.assert_allclose(torch_scores, faiss_scores, atol=2e-3)
    assert np.mean(torch_rows == faiss_rows) > 0.97


def test_built_vectors_belong_to_their_rows_though_encoded_by_length(hybrid_index, minilm):
    """The build encodes texts shortest first: each saved vector must still be its row's own."""
    from mmrag.indexes.collection import Collection

    collection = Collection(hybrid_index)
    for name in ("text-text", "text-image"):
        index = collection.dense(name)
        texts = [collection.store.get(int(row)).search_text for row in index.rows]
        assert len({len(t) for t in texts}) > 1  # lengths differ, so the order did change
        saved = np.asarray(index.saved_vectors(), dtype=np.float32)
        np.testing.assert_allclose(saved, minilm.encode_texts(texts), atol=2e-3)  # float16 on disk
