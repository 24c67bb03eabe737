"""Reading benchmark and prediction files with errors that name the file and the position.

Every loader goes through these helpers so that a missing file, a directory, a non-UTF-8 file,
malformed JSON or JSON past the limits of `indexes.corpus.limits` (nesting, integer length) is
reported the same way everywhere, as one line naming the file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mmrag.evaluation.errors import DatasetError
from mmrag.indexes.corpus.limits import JSONLimitError, loads


def read_text(path: str | Path) -> str:
    """The file's text; a UTF-8 byte-order mark (spreadsheets write one into CSVs) is dropped."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise DatasetError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DatasetError(f"{path}: is a directory, expected a file") from None
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def read_json(path: str | Path) -> Any:
    """A whole JSON document; a syntax error names the line and column."""
    text = read_text(path)
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(
            f"{path}: malformed JSON at line {exc.lineno} column {exc.colno} ({exc.msg})"
        ) from None
    except JSONLimitError as exc:
        raise DatasetError(f"{path}: {exc}") from None


def read_json_or_jsonl(path: str | Path) -> Any:
    """One JSON document, or JSON Lines (a list of the lines' values) when the file is that.

    For formats whose release is not pinned down (VLQA), where either may be met.
    """
    text = read_text(path)
    try:
        return loads(text)
    except json.JSONDecodeError as first:
        if first.msg != "Extra data":
            raise DatasetError(
                f"{path}: malformed JSON at line {first.lineno} column {first.colno} ({first.msg})"
            ) from None
    except JSONLimitError as exc:
        raise DatasetError(f"{path}: {exc}") from None
    values = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            values.append(loads(line))
        except json.JSONDecodeError as exc:
            raise DatasetError(
                f"{path}: malformed JSON Lines at line {number} column {exc.colno} ({exc.msg})"
            ) from None
        except JSONLimitError as exc:
            raise DatasetError(f"{path}: line {number}: {exc}") from None
    return values


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its newline), for TSV readers.

    Lines end at newlines only (as `open()` reads them): `str.splitlines` would also split at
    U+2028 and other separators that may occur inside a question's text.
    """
    text = read_text(path)  # text mode: \r\n and \r are already \n
    yield from enumerate(text.split("\n"), start=1)


def as_id(value: Any) -> str:
    """A question id as a string, so that 123, 123.0 and "123" join; booleans are not ids."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{value!r} is not a question id")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"{value!r} is not a question id")
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise ValueError(f"{value!r} is not a question id")


def as_float(value: Any) -> float:
    """A finite number from a CSV cell or JSON value (NaN and infinity are corruption)."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{value!r} is not a finite number")
    return number
