"""bm25s's index built in whole-array steps: the same vocabulary and score matrix, sooner.

bm25s tokenizes and scores one document at a time in Python (a dict look-up per word, then a
Counter and a few numpy calls per document); at WebQA's 930K sources that was most of a 58 s
build. Here each chunk of texts is split in C, all its words are looked up with one `map`, only
words never seen before go through the stop-word and stemmer path, and the score matrix is
computed from every (term, document) pair at once. The result is bm25s's own, bit for bit: the
same ids in the same order, the same float32 scores in the same CSC layout (tests/test_bm25.py
compares both with bm25s's build).
"""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
from collections.abc import Iterable
from itertools import chain, repeat
from typing import BinaryIO

import bm25s
import numpy as np
import Stemmer
from bm25s.scoring import (
    _build_idf_array,
    _build_nonoccurrence_array,
    _select_idf_scorer,
    _select_tfc_scorer,
)
from bm25s.tokenization import Tokenizer

UNSEEN = -2  # a word not looked at yet
STOPWORD = -1  # a word that never becomes a token


class CorpusTokens:
    """Token ids of a corpus fed chunk by chunk, as `Tokenizer.tokenize(update_vocab=True)`
    would give them: ids in order of first appearance, a stop word dropped, a text with no
    token given the empty token (id 0). The tokenizer's vocabulary is filled as it goes, so it
    saves and answers queries exactly as if it had tokenized the corpus itself."""

    def __init__(self, tokenizer: Tokenizer, splitter: str, stemmer: str | None) -> None:
        self.tokenizer = tokenizer
        self.split = re.compile(splitter).findall
        self.stemmer_name = stemmer
        self.stemmer = Stemmer.Stemmer(stemmer) if stemmer else None
        self.stopwords = frozenset(tokenizer.stopwords or ())
        # bm25s's first entry: the empty token, for texts with no word.
        tokenizer.word_to_id.setdefault("", 0)
        if self.stemmer is not None:
            tokenizer.word_to_stem.setdefault("", "")
            tokenizer.stem_to_sid.setdefault("", 0)
        self.empty_id = tokenizer.word_to_id[""]
        # word -> id, or STOPWORD: one dict answers every word already met.
        self.lookup: dict[str, int] = dict(tokenizer.word_to_id)
        self.chunks: list[np.ndarray] = []
        self.lengths: list[np.ndarray] = []

    def add(self, texts: list[str]) -> None:
        lower = self.tokenizer.lower
        words_per_text = [self.split(text.lower() if lower else text) for text in texts]
        counts = np.fromiter(map(len, words_per_text), dtype=np.int64, count=len(texts))
        words = list(chain.from_iterable(words_per_text))
        ids = np.fromiter(map(self.lookup.get, words, repeat(UNSEEN)), np.int64, len(words))
        unseen = np.flatnonzero(ids == UNSEEN)
        if len(unseen):
            self._learn(list(dict.fromkeys(words[i] for i in unseen)))
            ids[unseen] = [self.lookup[words[i]] for i in unseen]
        kept = ids != STOPWORD
        text_of_word = np.repeat(np.arange(len(texts)), counts)[kept]
        ids = ids[kept]
        lengths = np.bincount(text_of_word, minlength=len(texts))
        empty = np.flatnonzero(lengths == 0)
        if len(empty):
            starts = np.cumsum(lengths) - lengths
            ids = np.insert(ids, starts[empty], self.empty_id)
            lengths[empty] = 1
        self.chunks.append(ids.astype(np.int32))
        self.lengths.append(lengths)

    def _learn(self, words: list[str]) -> None:
        """New words in the order they first appear, which is the order bm25s numbers them."""
        vocabulary = self.tokenizer
        kept = []
        for word in words:
            if word in self.stopwords:
                self.lookup[word] = STOPWORD
            else:
                kept.append(word)
        if self.stemmer is None:
            for word in kept:
                vocabulary.word_to_id[word] = self.lookup[word] = len(vocabulary.word_to_id)
            return
        for word, stem in zip(kept, self.stemmer.stemWords(kept), strict=True):
            vocabulary.word_to_stem[word] = stem
            sid = vocabulary.stem_to_sid.setdefault(stem, len(vocabulary.stem_to_sid))
            vocabulary.word_to_id[word] = self.lookup[word] = sid

    def __getstate__(self) -> dict:
        """Picklable, for the second process: a Snowball stemmer is not, so it is made anew."""
        state = self.__dict__ | {"stemmer": None, "tokenizer": vars(self.tokenizer).copy()}
        state["tokenizer"]["stemmer"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        stemmer = Stemmer.Stemmer(state["stemmer_name"]) if state["stemmer_name"] else None
        tokenizer = Tokenizer.__new__(Tokenizer)
        vars(tokenizer).update(state["tokenizer"] | {"stemmer": stemmer})
        self.__dict__.update(state | {"stemmer": stemmer, "tokenizer": tokenizer})

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(every token id, corpus order; tokens per text)."""
        if not self.chunks:
            return np.empty(0, np.int32), np.empty(0, np.int64)
        return np.concatenate(self.chunks), np.concatenate(self.lengths)


ALONE = 65_536  # texts tokenized in the build's own process before a second one takes over


def tokenize_all(tokens: CorpusTokens, chunks: Iterable[list[str]]) -> CorpusTokens:
    """Every chunk added to `tokens`, in order: the first `ALONE` texts here, the rest in a
    second process that this one feeds while it goes on reading, storing and probing the
    corpus (the chunks come from that work), so the build's two halves run on two cores. The
    tokens come back as they would have been made here. A small corpus, or one core, never
    pays for the process. It is a fresh interpreter (`python -m` this module), not a fork
    (no lock another thread holds is copied into it) nor multiprocessing's spawn (which runs
    the caller's script again unless it guards its main)."""
    chunks, seen = iter(chunks), 0
    for chunk in chunks:
        tokens.add(chunk)
        seen += len(chunk)
        if seen >= ALONE and (os.cpu_count() or 1) > 1:
            break
    else:
        return tokens
    child = subprocess.Popen(
        [sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert child.stdin is not None and child.stdout is not None
    found = None
    try:
        pickle.dump(tokens, child.stdin, pickle.HIGHEST_PROTOCOL)
        for chunk in chunks:
            pickle.dump(chunk, child.stdin, pickle.HIGHEST_PROTOCOL)
        pickle.dump(None, child.stdin)
        child.stdin.close()
        found = pickle.load(child.stdout)
    except (EOFError, BrokenPipeError, pickle.UnpicklingError):
        pass
    finally:  # a failure here (an interrupt, a bad corpus line) takes the process with it
        if found is None:
            child.kill()
        child.wait()
    if not isinstance(found, CorpusTokens):
        raise RuntimeError(f"BM25 build: the tokenizing process failed (exit {child.returncode})")
    return found


def _tokenize(given: BinaryIO, back: BinaryIO) -> None:
    """The second process: the tokens so far, then chunks until None; the tokens back."""
    tokens = pickle.load(given)
    while (chunk := pickle.load(given)) is not None:
        tokens.add(chunk)
    pickle.dump(tokens, back, pickle.HIGHEST_PROTOCOL)
    back.flush()


def index_tokens(model: bm25s.BM25, tokens: CorpusTokens) -> None:
    """`model.index` over these tokens, with bm25s's formulas applied to all pairs at once.

    Sorting the (term, document) keys gives the term frequencies and, being column-major, the
    CSC order bm25s sorts into. Each step repeats bm25s's arithmetic on the same dtypes
    (float64 term weights, cast once to float32), so every score is the same float.
    """
    ids, lengths = tokens.arrays()
    vocabulary = tokens.tokenizer.get_vocab_dict()
    n_docs, n_terms = len(lengths), len(vocabulary)
    documents = np.repeat(np.arange(n_docs, dtype=np.int64), lengths)
    pairs, frequencies = np.unique(ids.astype(np.int64) * n_docs + documents, return_counts=True)
    terms = pairs // n_docs
    documents = pairs - terms * n_docs
    doc_frequencies = np.bincount(terms, minlength=n_terms)
    by_term = dict(enumerate(doc_frequencies.tolist()))
    idf_of, tfc_of, average = (
        _select_idf_scorer(model.idf_method),
        _select_tfc_scorer(model.method),
        lengths.mean(),
    )
    idf = _build_idf_array(by_term, n_docs=n_docs, compute_idf_fn=idf_of, dtype=model.dtype)
    tfc = tfc_of(
        tf_array=frequencies.astype(model.dtype),
        l_d=lengths[documents],
        l_avg=average,
        k1=model.k1,
        b=model.b,
        delta=model.delta,
    )
    weights = idf[terms] * tfc
    model.nonoccurrence_array = None
    if model.method in model.methods_requiring_nonoccurrence:  # BM25L, BM25+
        model.nonoccurrence_array = _build_nonoccurrence_array(
            doc_frequencies=by_term,
            n_docs=n_docs,
            compute_idf_fn=idf_of,
            calculate_tfc_fn=tfc_of,
            l_d=average,
            l_avg=average,
            k1=model.k1,
            b=model.b,
            delta=model.delta,
            dtype=model.dtype,
        )
        weights -= model.nonoccurrence_array[terms]
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(doc_frequencies, out=indptr[1:])
    model.scores = {
        "data": weights.astype(model.dtype),
        "indices": documents.astype(model.int_dtype),
        "indptr": indptr,
        "num_docs": n_docs,
    }
    model.vocab_dict = vocabulary
    model.unique_token_ids_set = set(vocabulary.values())


def index_as_bm25s(model: bm25s.BM25, tokenizer: Tokenizer, texts: list[str]) -> None:
    """The same index by bm25s's own path, a document at a time: the reference that
    `CorpusTokens` and `index_tokens` are held to (tests/test_bm25.py, bench/bm25.py)."""
    ids = tokenizer.tokenize(texts, update_vocab=True, return_as="ids", show_progress=False)
    model.index((ids, tokenizer.get_vocab_dict()), show_progress=False)


if __name__ == "__main__":  # the second process of `tokenize_all`
    _tokenize(sys.stdin.buffer, sys.stdout.buffer)
