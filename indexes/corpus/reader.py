"""One entry point over every corpus format, de-duplicating sources by id across files."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from mmrag.indexes.corpus import jsonl, webqa
from mmrag.indexes.errors import CorpusError
from mmrag.indexes.sources import Source

_READERS = {".json": webqa.iter_sources, ".jsonl": jsonl.iter_sources}


@dataclass
class CorpusStats:
    by_modality: Counter[str] = field(default_factory=Counter)
    duplicates: int = 0

    @property
    def total(self) -> int:
        return sum(self.by_modality.values())


def corpus_format(path: Path) -> str:
    if path.suffix not in _READERS:
        raise CorpusError(
            f"{path}: unknown corpus format {path.suffix or '(no extension)'!r}; "
            "expected a WebQA .json or a .jsonl file"
        )
    return path.suffix


def read_corpus(paths: Iterable[str | Path], stats: CorpusStats | None = None) -> Iterator[Source]:
    """Stream unique sources; only the set of ids seen is kept in memory."""
    stats = stats if stats is not None else CorpusStats()
    seen: set[str] = set()
    for path in map(Path, paths):
        for source in _READERS[corpus_format(path)](path):
            if source.id in seen:
                stats.duplicates += 1
                continue
            seen.add(source.id)
            stats.by_modality[source.modality] += 1
            yield source
