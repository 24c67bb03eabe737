"""Small things both `eval run` commands do the same way: option checks, warnings, the summary."""

from __future__ import annotations

import sys
from pathlib import Path

from mmrag.evaluation.errors import EvaluationError


def check_limit(limit: int | None) -> None:
    if limit is not None and limit < 1:
        raise EvaluationError(f"--limit must be at least 1, got {limit}")


def check_file(option: str, path: Path | None) -> None:
    """An optional input file given on the command line must exist: said before models load."""
    if path is not None and not path.is_file():
        raise EvaluationError(f"{option} {path}: no such file")


def print_warnings(warnings: list[str]) -> None:
    for warning in warnings:
        print(f"mmrag: warning: {warning}", file=sys.stderr)
