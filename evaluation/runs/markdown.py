"""Markdown tables and number formatting for the run reports (GitHub-flavoured tables)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def percent(value: float | None, digits: int = 2) -> str:
    """A 0..1 score as the leaderboards print it (x100); n/a where it was not computed."""
    return "n/a" if value is None else f"{100 * value:.{digits}f}"


def number(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def cell(value: Any) -> str:
    """Table cells stay on one line and cannot end the cell early."""
    return " ".join(str(value).split()).replace("|", "\\|")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = [
        "| " + " | ".join(cell(h) for h in headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def timing_table(timings: Sequence[Mapping[str, float]], order: Sequence[str] = ()) -> str:
    """Mean and max seconds per stage (`*_s` keys), stages in `order` first, then as met."""
    stages = [stage for stage in order if any(stage in t for t in timings)]
    stages += [s for s in dict.fromkeys(key for t in timings for key in t) if s not in stages]
    rows = []
    for stage in stages:
        values = [t[stage] for t in timings if stage in t]
        mean = sum(values) / len(values)
        rows.append([stage.removesuffix("_s"), len(values), number(mean), number(max(values))])
    return table(["stage", "questions", "mean s", "max s"], rows)
