"""BM25 over every source with bm25s: a sparse score matrix, saved as .npy and memory-mapped.

One index spans both modalities so that image captions and snippets share document statistics
and their scores are comparable; modality filtering is a row subset of one score vector, so
per-modality top-k costs one scoring pass, not one per modality.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import bm25s
import numpy as np
import Stemmer
from bm25s.tokenization import Tokenizer

from mmrag.indexes.bm25_build import CorpusTokens, index_tokens, tokenize_all
from mmrag.indexes.errors import IndexFormatError

BM25_DIR = "bm25"
OCR_BM25_DIR = "bm25-ocr"  # BM25 over the text read in images (row i: source row i's OCR text)
PARAMS_FILE = "params.json"
TOKENIZE_CHUNK = 8192


@dataclass(frozen=True)
class BM25Params:
    """Everything that changes scores; stored in the manifest and checked on load."""

    k1: float = 1.5
    b: float = 0.75
    method: str = "lucene"
    stemmer: str | None = "english"
    stopwords: str | None = "en"
    lower: bool = True
    # \w+ rather than bm25s's \w\w+: single digits and letters ("Route 9", "Plan B") matter here.
    splitter: str = r"(?u)\b\w+\b"


def make_tokenizer(params: BM25Params) -> Tokenizer:
    return Tokenizer(
        lower=params.lower,
        splitter=params.splitter,
        stopwords=params.stopwords or [],
        stemmer=Stemmer.Stemmer(params.stemmer) if params.stemmer else None,
    )


def _chunks(texts: Iterable[str], size: int) -> Iterator[list[str]]:
    chunk: list[str] = []
    for text in texts:
        chunk.append(text)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def top_k(
    scores: np.ndarray, k: int, rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Rows and scores of the k best, best first, equal scores in row order."""
    if rows is None:
        return best_of(scores, np.arange(len(scores)), k)
    return best_of(scores[rows], np.asarray(rows), k)


def best_of(values: np.ndarray, keys: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best (keys, values), best first, equal values in key order.

    argpartition keeps it O(n) over 930K rows, but which of several equal scores it leaves
    inside the first k is not defined (it differs between CPUs), so a tie at the k-th place is
    settled here: every key scoring above the k-th score, then the lowest keys among those
    equal to it.
    """
    k = min(k, len(values))
    if k <= 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=values.dtype)
    if k < len(values):
        kth = values[np.argpartition(-values, k - 1)[k - 1]]
        above = np.flatnonzero(values > kth)
        tied = np.flatnonzero(values == kth)
        tied = tied[np.argsort(keys[tied], kind="stable")][: k - len(above)]
        best = np.concatenate([above, tied])
    else:
        best = np.arange(len(values))
    best = best[np.lexsort((keys[best], -values[best]))]
    return keys[best].astype(np.int64), values[best]


class BM25Index:
    def __init__(self, model: bm25s.BM25, tokenizer: Tokenizer, params: BM25Params) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.params = params
        # Queries are tokenized read-only against these: bm25s's own tokenizer caches every new
        # query word, which in a long-running server grows without bound.
        self._split = re.compile(params.splitter).findall
        self._stopwords = frozenset(tokenizer.stopwords or ())
        self._stemmer = Stemmer.Stemmer(params.stemmer) if params.stemmer else None
        self._term_ids = {term: i for term, i in tokenizer.get_vocab_dict().items() if term}
        # Plain arrays over the memory maps: slicing an np.memmap costs a Python-level wrapper.
        self._matrix = tuple(np.asarray(model.scores[key]) for key in ("data", "indices", "indptr"))
        self._local = threading.local()

    @classmethod
    def build(cls, texts: Iterable[str], params: BM25Params | None = None) -> BM25Index:
        """Tokenize as the texts stream past (a large corpus in a second process: see
        `tokenize_all`); only token ids are kept, never the texts."""
        params = params or BM25Params()
        tokenizer = make_tokenizer(params)
        tokens = CorpusTokens(tokenizer, params.splitter, params.stemmer)
        tokens = tokenize_all(tokens, _chunks(texts, TOKENIZE_CHUNK))
        model = bm25s.BM25(k1=params.k1, b=params.b, method=params.method)
        index_tokens(model, tokens)
        return cls(model, tokens.tokenizer, params)

    @property
    def num_docs(self) -> int:
        return int(self.model.scores["num_docs"])

    def query_ids(self, query: str) -> list[int]:
        """Term ids of the query's known terms, tokenized exactly as documents were."""
        words = self._split(query.lower() if self.params.lower else query)
        words = [word for word in words if word not in self._stopwords]
        terms = self._stemmer.stemWords(words) if self._stemmer else words
        return [self._term_ids[term] for term in terms if term in self._term_ids]

    def _postings(self, ids: list[int]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(rows, score contributions) of each query term, in query order. The rows as intp:
        numpy indexes with those 2-3 times faster than with the int32 stored."""
        data, indices, indptr = self._matrix
        for term in ids:
            start, stop = indptr[term], indptr[term + 1]
            yield indices[start:stop].astype(np.intp), data[start:stop]

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document; a query with no known term scores all zero.

        bm25s's own sum, term by term, without its `np.add.at`: a term's documents are
        distinct, so a plain indexed add does the same float32 additions in the same order,
        several times faster (BENCHMARKS.md, "BM25").
        """
        ids = self.query_ids(query)
        scores = np.zeros(self.num_docs, dtype=self.model.dtype)
        for rows, contributions in self._postings(ids):
            scores[rows] += contributions
        if self.model.nonoccurrence_array is not None and ids:  # BM25L, BM25+
            scores += self.model.nonoccurrence_array[ids].sum()
        return scores

    def hits(self, query: str) -> tuple[np.ndarray, np.ndarray]:
        """(rows scoring above zero, in no set order; their scores): all that a ranked list
        keeps (a row sharing no term with the query is no hit).

        Summed as `scores` sums, but into this thread's scratch array, and then each reached
        row is read and cleared where a term first reaches it (a second term finds it cleared):
        no pass over, and no fresh allocation of, every row of a 930K index (BENCHMARKS.md,
        "BM25").
        """
        if self.model.nonoccurrence_array is not None:  # BM25L, BM25+: every row scores
            scores = self.scores(query)
            rows = np.flatnonzero(scores > 0)
            return rows, scores[rows]
        sums = self._scratch()
        postings = list(self._postings(self.query_ids(query)))
        for rows, contributions in postings:
            sums[rows] += contributions
        found_rows, found_values = [np.empty(0, np.int64)], [np.empty(0, sums.dtype)]
        for rows, _ in postings:
            values = sums.take(rows)
            sums[rows] = 0
            positive = values > 0
            found_rows.append(rows[positive])
            found_values.append(values[positive])
        return np.concatenate(found_rows), np.concatenate(found_values)

    def _scratch(self) -> np.ndarray:
        """Per thread, a zeroed score per row, left zeroed after each use."""
        sums = getattr(self._local, "sums", None)
        if sums is None:
            sums = self._local.sums = np.zeros(self.num_docs, dtype=self.model.dtype)
        return sums

    def search(self, query: str, k: int, rows: np.ndarray | None = None):
        """Top-k (rows, scores), optionally among a subset of rows (one modality)."""
        return top_k(self.scores(query), k, rows)

    def save(self, root: Path, name: str = BM25_DIR) -> None:
        folder = root / name
        self.model.save(str(folder))
        self.tokenizer.save_vocab(str(folder))
        self.tokenizer.save_stopwords(str(folder))
        (folder / PARAMS_FILE).write_text(json.dumps(asdict(self.params), indent=2))

    @classmethod
    def load(cls, root: Path, *, mmap: bool = True, name: str = BM25_DIR) -> BM25Index:
        folder = root / name
        try:
            params = BM25Params(**json.loads((folder / PARAMS_FILE).read_text()))
        except (OSError, TypeError, json.JSONDecodeError) as exc:
            raise IndexFormatError(f"{folder}: unreadable BM25 parameters ({exc})") from None
        tokenizer = make_tokenizer(params)
        tokenizer.load_vocab(str(folder))
        tokenizer.load_stopwords(str(folder))
        model = bm25s.BM25.load(str(folder), mmap=mmap)
        return cls(model, tokenizer, params)
