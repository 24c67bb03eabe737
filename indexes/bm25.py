"""BM25 over every source with bm25s: a sparse score matrix, saved as .npy and memory-mapped.

One index spans both modalities so that image captions and snippets share document statistics
and their scores are comparable; modality filtering is a row subset of one score vector, so
per-modality top-k costs one scoring pass, not one per modality.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import bm25s
import numpy as np
import Stemmer
from bm25s.tokenization import Tokenizer

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
    """Rows and scores of the k best, best first, equal scores in row order.

    argpartition keeps it O(n) over 930K rows, but which of several equal scores it leaves
    inside the first k is not defined (it differs between CPUs), so a tie at the k-th place is
    settled here: every row scoring above the k-th score, then the lowest rows among those equal
    to it.
    """
    candidates = scores if rows is None else scores[rows]
    k = min(k, len(candidates))
    if k <= 0:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=scores.dtype)
    keys = np.arange(len(candidates)) if rows is None else np.asarray(rows)
    if k < len(candidates):
        kth = candidates[np.argpartition(-candidates, k - 1)[k - 1]]
        above = np.flatnonzero(candidates > kth)
        tied = np.flatnonzero(candidates == kth)
        tied = tied[np.argsort(keys[tied], kind="stable")][: k - len(above)]
        best = np.concatenate([above, tied])
    else:
        best = np.arange(len(candidates))
    best = best[np.lexsort((keys[best], -candidates[best]))]
    return keys[best].astype(np.int64), candidates[best]


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

    @classmethod
    def build(cls, texts: Iterable[str], params: BM25Params | None = None) -> BM25Index:
        """Tokenize as the texts stream past; only token ids are kept, never the texts."""
        params = params or BM25Params()
        tokenizer = make_tokenizer(params)
        token_ids: list[list[int]] = []
        for chunk in _chunks(texts, TOKENIZE_CHUNK):
            token_ids.extend(
                tokenizer.tokenize(chunk, update_vocab=True, return_as="ids", show_progress=False)
            )
        model = bm25s.BM25(k1=params.k1, b=params.b, method=params.method)
        model.index((token_ids, tokenizer.get_vocab_dict()), show_progress=False)
        return cls(model, tokenizer, params)

    @property
    def num_docs(self) -> int:
        return int(self.model.scores["num_docs"])

    def query_ids(self, query: str) -> list[int]:
        """Term ids of the query's known terms, tokenized exactly as documents were."""
        words = self._split(query.lower() if self.params.lower else query)
        words = [word for word in words if word not in self._stopwords]
        terms = self._stemmer.stemWords(words) if self._stemmer else words
        return [self._term_ids[term] for term in terms if term in self._term_ids]

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document; a query with no known term scores all zero."""
        ids = self.query_ids(query)
        if not ids:
            return np.zeros(self.num_docs, dtype=np.float32)
        return self.model.get_scores_from_ids(ids)

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
