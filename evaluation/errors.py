"""Errors in benchmark files, prediction files and evaluation options.

They derive from `indexes.errors.InputError`, so every front end reports them as one line
(`mmrag: error: ...`, exit 1) instead of a traceback: a bad gold or prediction file is the
user's input being wrong, not a bug in mmrag.
"""

from __future__ import annotations

from pathlib import Path

from mmrag.indexes.errors import InputError


class EvaluationError(InputError):
    """Evaluation cannot run with the given options (e.g. an FL model that cannot be loaded)."""


class DatasetError(EvaluationError):
    """A gold or prediction file that cannot be read as the format it is given as."""


def record_error(path: str | Path, where: str, problem: str) -> DatasetError:
    """An error naming the file and the record, so the user can find the bad line."""
    return DatasetError(f"{path}: {where}: {problem}")
