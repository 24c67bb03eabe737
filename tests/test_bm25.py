"""BM25 scores and rankings against rank_bm25, the reference implementation, on one corpus."""

from __future__ import annotations

import random

import numpy as np
import rank_bm25

from mmrag.indexes.bm25 import BM25Index, BM25Params, best_of, top_k

WORDS = [f"w{n}" for n in range(400)]


def zipf_corpus(n_docs: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    weights = [1 / (rank + 1) for rank in range(len(WORDS))]
    return [" ".join(rng.choices(WORDS, weights, k=rng.randint(4, 40))) for _ in range(n_docs)]


def reference_scores(index: BM25Index, texts: list[str], query: str, model) -> np.ndarray:
    """rank_bm25 fed exactly our tokens (as id strings), so only the scoring is compared."""
    corpus_tokens = [
        [str(i) for i in ids]
        for ids in index.tokenizer.tokenize(
            texts, update_vocab="never", return_as="ids", show_progress=False
        )
    ]
    reference = model(corpus_tokens, k1=index.params.k1, b=index.params.b)
    return reference.get_scores([str(i) for i in index.query_ids(query)])


def test_robertson_matches_rank_bm25_okapi_scores_and_top10():
    """rank_bm25's BM25Okapi is the reference. bm25s leaves the constant (k1 + 1) out of the
    TF term, which scales every score alike and so changes no ranking. (rank_bm25's BM25L and
    BM25Plus multiply by the raw term frequency, unlike their papers, so they are no reference.)
    """
    texts = zipf_corpus(300, seed=7)
    index = BM25Index.build(texts, BM25Params(method="robertson", stemmer=None, stopwords=None))
    rng = random.Random(11)
    doc_freq = {w: sum(w in t.split() for t in texts) for w in WORDS}
    # Okapi floors negative IDF (df > N/2) at epsilon*mean IDF where bm25s clips it to zero;
    # real queries rarely contain such terms (stopwords), so queries avoid them.
    rare = [w for w in WORDS if 0 < doc_freq[w] < len(texts) / 2]
    for _ in range(20):
        query = " ".join(rng.sample(rare, 4))
        ours = index.scores(query)
        theirs = reference_scores(index, texts, query, rank_bm25.BM25Okapi)
        assert theirs.max() > 0
        np.testing.assert_allclose(ours * (index.params.k1 + 1), theirs, rtol=1e-4, atol=1e-4)
        rows, values = index.search(query, 10)
        # The same ten scores as the reference's ten best (equal scores may swap members)...
        np.testing.assert_allclose(theirs[rows], np.sort(theirs)[::-1][:10], rtol=1e-4)
        # ...and equal scores in row order, whatever order the CPU's partition left them in.
        assert list(rows) == list(np.lexsort((np.arange(len(ours)), -ours))[:10])
        assert list(values) == sorted(values, reverse=True)


def test_stemming_and_stopwords_apply_to_documents_and_queries():
    index = BM25Index.build(["The lighthouses were built", "A bakery sells bread"])
    rows, scores = index.search("lighthouse building", 2)
    assert rows[0] == 0 and scores[0] > 0 and scores[1] == 0
    assert index.query_ids("the of and") == []


def test_unknown_words_score_nothing():
    index = BM25Index.build(["red door", "blue boat"])
    assert not index.scores("zebra xylophone").any()


def test_single_digits_are_tokens():
    index = BM25Index.build(["Route 9 bridge", "Route 7 bridge"])
    rows, _ = index.search("route 9", 1)
    assert rows[0] == 0


def test_top_k_within_a_row_subset_is_deterministic():
    scores = np.array([0.5, 2.0, 2.0, 1.0, 3.0], dtype=np.float32)
    rows, values = top_k(scores, 3)
    assert list(rows) == [4, 1, 2] and list(values) == [3.0, 2.0, 2.0]
    rows, values = top_k(scores, 10, rows=np.array([0, 2, 3]))
    assert list(rows) == [2, 3, 0]
    assert len(top_k(scores, 0)[0]) == 0


def test_a_tie_at_the_kth_place_keeps_the_lowest_rows():
    """argpartition leaves an undefined choice of equal scores inside the first k (here it
    picks rows from the far end); rankings must not depend on the CPU."""
    scores = np.zeros(1000, dtype=np.float32)
    scores[::7] = 1.0  # 143 rows tie for first place
    scores[500] = 2.0
    rows, values = top_k(scores, 50)
    assert rows[0] == 500 and values[0] == 2.0
    assert list(rows[1:]) == list(range(0, 49 * 7, 7))
    subset = np.arange(1000)[::-1].copy()  # a row subset in any order ranks the same
    assert list(top_k(scores, 50, rows=subset)[0]) == list(rows)


def test_save_and_load_round_trip(tmp_path):
    texts = zipf_corpus(50, seed=3)
    index = BM25Index.build(texts)
    index.save(tmp_path)
    loaded = BM25Index.load(tmp_path)
    assert loaded.params == index.params
    np.testing.assert_array_equal(loaded.scores("w3 w17 w40"), index.scores("w3 w17 w40"))


def test_the_build_is_bm25s_own_index_bit_for_bit(monkeypatch):
    """The whole-array build gives bm25s's document-at-a-time index exactly: the same ids in
    the same order, the same float32 scores, for every scoring method, across chunk
    boundaries, with texts that have no word or only stop words."""
    import bm25s

    from mmrag.indexes import bm25 as bm25_module
    from mmrag.indexes.bm25 import make_tokenizer
    from mmrag.indexes.bm25_build import index_as_bm25s

    monkeypatch.setattr(bm25_module, "TOKENIZE_CHUNK", 7)
    rng = random.Random(5)
    words = [*WORDS[:60], "Running", "runs", "the", "Of", "lighthouses", "ΟΔΟΣ", "9", "café"]
    texts = [" ".join(rng.choices(words, k=rng.randint(0, 25))) for _ in range(120)]
    texts += ["", "the of a", "!!!"]
    for params in [
        BM25Params(),
        BM25Params(method="robertson", stemmer=None, stopwords=None),
        BM25Params(method="bm25+", lower=False),
        BM25Params(method="bm25l"),
        BM25Params(method="atire"),
    ]:
        ours = BM25Index.build(texts, params)
        tokenizer = make_tokenizer(params)
        theirs = bm25s.BM25(k1=params.k1, b=params.b, method=params.method)
        index_as_bm25s(theirs, tokenizer, texts)
        for key in ("data", "indices", "indptr"):
            assert ours.model.scores[key].dtype == theirs.scores[key].dtype
            np.testing.assert_array_equal(ours.model.scores[key], theirs.scores[key])
        assert ours.num_docs == len(texts)
        assert list(ours.tokenizer.word_to_id.items()) == list(tokenizer.word_to_id.items())
        assert list(ours.tokenizer.stem_to_sid.items()) == list(tokenizer.stem_to_sid.items())
        assert ours.model.vocab_dict == theirs.vocab_dict
        if theirs.nonoccurrence_array is not None:
            np.testing.assert_array_equal(
                ours.model.nonoccurrence_array, theirs.nonoccurrence_array
            )
        for query in ["running lighthouse", "w3 w4 w5 w5", "ΟΔΟΣ 9"]:
            ids = ours.query_ids(query)
            assert ids
            np.testing.assert_array_equal(ours.scores(query), theirs.get_scores_from_ids(ids))


def test_a_build_tokenized_in_a_second_process_is_the_same_bit_for_bit(monkeypatch):
    """Past `ALONE` texts a second process tokenizes the rest (the build's reading goes on
    here): the same vocabulary, ids and float32 scores as a build in one process, with and
    without a stemmer, across the hand-over."""
    from mmrag.indexes import bm25 as bm25_module
    from mmrag.indexes import bm25_build

    monkeypatch.setattr(bm25_module, "TOKENIZE_CHUNK", 16)
    texts = [*zipf_corpus(300, seed=11), "", "the of a", "Running runs café"]
    for params in [BM25Params(), BM25Params(method="bm25+", stemmer=None, lower=False)]:
        monkeypatch.setattr(bm25_build, "ALONE", len(texts) + 1)
        alone = BM25Index.build(texts, params)
        monkeypatch.setattr(bm25_build, "ALONE", 40)
        handed = BM25Index.build(texts, params)
        for key in ("data", "indices", "indptr"):
            assert handed.model.scores[key].dtype == alone.model.scores[key].dtype
            np.testing.assert_array_equal(handed.model.scores[key], alone.model.scores[key])
        assert list(handed.tokenizer.word_to_id.items()) == list(alone.tokenizer.word_to_id.items())
        assert handed.tokenizer.word_to_stem == alone.tokenizer.word_to_stem
        assert handed.query_ids("running w3 café") == alone.query_ids("running w3 café")
        assert handed.query_ids("running w3 café")
        np.testing.assert_array_equal(handed.scores("w5 w9 run"), alone.scores("w5 w9 run"))


def test_hits_are_the_rows_a_ranked_list_keeps():
    texts = zipf_corpus(400, seed=9)
    index = BM25Index.build(texts)
    subset = np.arange(0, 400, 3)
    for query in ["w5 w90", "w1 w2 w3 w4", "w399 nothing", "w7 w7 w8"]:
        rows, values = index.hits(query)
        assert len(rows) and (values > 0).all()
        scores = index.scores(query)
        np.testing.assert_array_equal(np.sort(rows), np.flatnonzero(scores > 0))
        np.testing.assert_array_equal(values, scores[rows])
        # Ranking the hits of a subset is ranking the subset and dropping the non-hits.
        top, top_values = top_k(scores, 50, subset)
        in_subset = np.isin(rows, subset)
        best, best_values = best_of(values[in_subset], rows[in_subset], 50)
        np.testing.assert_array_equal(best, top[top_values > 0])
        np.testing.assert_array_equal(best_values, top_values[top_values > 0])
