"""Limits on the JSON users bring, shared by every reader of their corpus and evaluation files.

A 200 KB file of `[` made ijson grow to 23 GB (it keeps a path string per nesting level, so
memory grows with the square of the depth) and made `json.loads` raise RecursionError, a
traceback instead of a one-line error. So the corpus readers and the evaluation loaders parse a
user's JSON through `loads` (whole documents and JSON Lines) or `GuardedReader` (ijson streams),
which refuse nesting deeper than `MAX_DEPTH` before the parser sees it. Index files mmrag wrote
itself and verifies by checksum are not user input and are not parsed here.

The depth is counted on the raw bytes (brackets outside strings), not on parser events: a
Python step per ijson event took longer than ijson's whole parse of a WebQA file, while the byte
count is two C-level passes over each chunk.
"""

from __future__ import annotations

import json
import re
import sys
from itertools import accumulate
from typing import Any, BinaryIO

MAX_DEPTH = 64
"""The deepest nesting of arrays and objects read from a user's file.

Real WebQA, A-OKVQA, ST-VQA, VLQA and Toloka files nest fewer than 10 levels, so a file past
this is corrupt or hostile; the limit also stays far below `json`'s recursion limit (1000).
"""

MAX_LINE_BYTES = 16 << 20
"""The longest line read from a user's JSON Lines file.

A line is held whole, as bytes, as text and as its parsed record (about four times its size),
so a 1 GB corpus without a newline (a sparse file reads as zeros) grew `index build` to 3.45 GB
before its "malformed JSON". A corpus record is a caption or a passage, far below this.
"""

_ESCAPE = re.compile(rb'\\[\\"]')  # the escapes that can hide a quote: \\ and \"
_NOT_QUOTES_OR_BRACKETS = bytes(sorted(set(range(256)) - set(b'"[]{}')))
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_CHUNK = 64 * 1024  # as ijson reads: the guard's passes over a chunk stay in the CPU's cache


class JSONLimitError(ValueError):
    """JSON past what mmrag reads from a user: too deeply nested, or an integer too long."""


class DepthGuard:
    """The nesting depth of a JSON text fed in consecutive UTF-8 chunks.

    Only brackets outside strings count. In UTF-8 the bytes of `"`, `\\` and the brackets never
    occur inside a multi-byte character, and escape pairs are dropped before quotes are
    matched, so the count is exact as far as the text is valid JSON (a parser stops there).
    """

    def __init__(self) -> None:
        self.depth = 0
        self._in_string = False
        self._pending = b""  # a backslash that pairs with the next chunk's first byte

    def feed(self, chunk: bytes) -> None:
        """Raise JSONLimitError if the text fed so far nests deeper than MAX_DEPTH."""
        text = self._pending + chunk
        odd = (len(text) - len(text.rstrip(b"\\"))) % 2
        self._pending = text[len(text) - odd :]
        # Only quotes and brackets, once the escapes that could hide a quote are gone; then each
        # `""` goes: no bracket lies between the two, so whichever strings they open or close,
        # every other bracket stays inside or outside a string (a chunk of WebQA shrinks to its
        # brackets and the rare strings holding one).
        marks = _ESCAPE.sub(b"", text[: len(text) - odd]).translate(None, _NOT_QUOTES_OR_BRACKETS)
        pieces = marks.replace(b'""', b"").split(b'"')
        brackets = b"".join(pieces[self._in_string :: 2])
        self._in_string ^= len(pieces) % 2 == 0  # an odd number of quotes
        if max(accumulate(map(_STEP.__getitem__, brackets), initial=self.depth)) > MAX_DEPTH:
            raise JSONLimitError(f"JSON nested deeper than {MAX_DEPTH} levels")
        self.depth += len(brackets) - 2 * (brackets.count(b"]") + brackets.count(b"}"))


class GuardedReader:
    """A binary file for ijson whose reads pass through a DepthGuard first.

    ijson parses only what it has read, so nothing deeper than MAX_DEPTH ever reaches it. (Its
    yajl parser refuses integers it cannot hold itself, as a syntax error.)
    """

    def __init__(self, handle: BinaryIO) -> None:
        self._handle = handle
        self._guard = DepthGuard()

    def read(self, size: int = -1) -> bytes:
        chunk = self._handle.read(size)
        self._guard.feed(chunk)
        return chunk


def _integer(digits: str) -> int:
    """`int`, whose ValueError past `sys.get_int_max_str_digits()` would escape `json.loads`
    as a traceback."""
    try:
        return int(digits)
    except ValueError:
        raise JSONLimitError(
            f"an integer of {len(digits.lstrip('-'))} digits "
            f"(at most {sys.get_int_max_str_digits()})"
        ) from None


# built once: `json.loads(text, parse_int=…)` builds a decoder a call (0.7 s of a 200K-line
# corpus's read)
_DECODER = json.JSONDecoder(parse_int=_integer)


def loads(text: str) -> Any:
    """`json.loads` for a user's text: JSONLimitError past MAX_DEPTH or for an integer too long
    to convert, `json.JSONDecodeError` for a syntax error."""
    # A text cannot nest deeper than it has opening brackets: a corpus line's few are
    # counted in C, and only a text with more is walked by the guard.
    if text.count("[") + text.count("{") > MAX_DEPTH:
        guard = DepthGuard()
        data = text.encode("utf-8", "surrogatepass")
        for start in range(0, len(data), _CHUNK):
            guard.feed(data[start : start + _CHUNK])
    if text.startswith("\ufeff"):  # as json.loads says it; the decoder alone would not
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return _DECODER.decode(text)
