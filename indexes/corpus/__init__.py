"""Corpus readers: stream `Source`s out of the formats users bring."""

from mmrag.indexes.corpus.reader import CorpusStats, read_corpus

__all__ = ["CorpusStats", "read_corpus"]
