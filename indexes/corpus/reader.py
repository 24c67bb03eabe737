"""One entry point over every corpus format: sources de-duplicated by id across files, and
cut to the lengths the rest of mmrag reads."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import xxhash

from mmrag.indexes.corpus import jsonl, webqa
from mmrag.indexes.errors import CorpusError
from mmrag.indexes.sources import Source

_READERS: dict[str, Callable[[Path], Iterator[tuple[str, Source]]]] = {
    ".json": webqa.iter_sources,
    ".jsonl": jsonl.iter_sources,
}
# The most characters of a source's title and text an index keeps. Every answer that cites a
# source reads its text (sentences, words, parse); a text of 1,000,000 characters or more was
# a 500 on every question that retrieved it (spaCy's limit), and one of 100,000 takes tens of
# seconds to read on 2 cores. A longer document is better split into passages, each a source.
MAX_TITLE_CHARS = 1_000
MAX_TEXT_CHARS = 100_000
DuplicatePolicy = Literal["error", "first"]
DUPLICATE_POLICIES: tuple[DuplicatePolicy, ...] = ("error", "first")


@dataclass
class CorpusStats:
    by_modality: Counter[str] = field(default_factory=Counter)
    duplicates: int = 0  # sources skipped: their id came before (with the same content)
    cut: int = 0  # sources whose title or text was cut to MAX_TITLE_CHARS / MAX_TEXT_CHARS
    first_cut: str = ""  # where the first of them stands

    @property
    def total(self) -> int:
        return sum(self.by_modality.values())

    def warnings(self) -> list[str]:
        """What reading the corpus changed in it, said once."""
        if not self.cut:
            return []
        return [
            f"{self.cut} sources had a title over {MAX_TITLE_CHARS:,} or a text over "
            f"{MAX_TEXT_CHARS:,} characters, cut to that (the first: {self.first_cut}); "
            "split long documents into passages, one source each"
        ]


def corpus_format(path: Path) -> str:
    if path.suffix not in _READERS:
        raise CorpusError(
            f"{path}: unknown corpus format {path.suffix or '(no extension)'!r}; "
            "expected a WebQA .json or a .jsonl file"
        )
    return path.suffix


def _located(paths: list[Path]) -> Iterator[tuple[str, Source]]:
    for path in paths:
        yield from _READERS[corpus_format(path)](path)


def _content(source: Source) -> int:
    fields = (source.modality, source.title, source.text, source.url, source.image_ref or "")
    return xxhash.xxh3_64_intdigest("\0".join(fields).encode("utf-8", "surrogatepass"))


def _cut(source: Source) -> Source:
    if len(source.title) <= MAX_TITLE_CHARS and len(source.text) <= MAX_TEXT_CHARS:
        return source
    return dataclasses.replace(
        source, title=source.title[:MAX_TITLE_CHARS], text=source.text[:MAX_TEXT_CHARS]
    )


def read_corpus(
    paths: Iterable[str | Path],
    stats: CorpusStats | None = None,
    *,
    on_duplicate: DuplicatePolicy = "error",
) -> Iterator[Source]:
    """Stream unique sources; only each id's content digest is kept in memory.

    An id given again with the same content (WebQA lists a fact under every question it
    serves) is skipped and counted; with other content, it is an error naming both places,
    or, with `on_duplicate="first"`, the first is kept and the later one counted (it was
    dropped silently). Ids are text: the integer 1 and the string "1" are one id. Titles and
    texts are cut to MAX_TITLE_CHARS and MAX_TEXT_CHARS, counted in `stats.cut`."""
    stats = stats if stats is not None else CorpusStats()
    files = list(map(Path, paths))
    seen: dict[str, int] = {}
    for where, source in _located(files):
        cut = _cut(source)
        if cut is not source:
            stats.cut += 1
            stats.first_cut = stats.first_cut or f"{where}: id {source.id!r}"
        content = _content(cut)
        if source.id in seen:
            if seen[source.id] != content and on_duplicate == "error":
                first = _first_place(files, source.id)
                raise CorpusError(
                    f"{where}: id {source.id!r} is taken by {first}, with other content; "
                    "give one of them another id, or pass --on-duplicate first to keep the "
                    "first of each"
                )
            stats.duplicates += 1
            continue
        seen[source.id] = content
        stats.by_modality[source.modality] += 1
        yield cut


def _first_place(paths: list[Path], ident: str) -> str:
    """Where a source id first appears (read again: a build keeps no place per id)."""
    return next(where for where, source in _located(paths) if source.id == ident)
