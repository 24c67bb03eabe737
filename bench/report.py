"""How every benchmark hands its figures over: JSON on stdout, and atomically to --out."""

from __future__ import annotations

import json
from pathlib import Path

from indexes.atomic import atomic_write_text


def write_report(results: dict, out: Path | None) -> None:
    text = json.dumps(results, indent=2)
    print(text)
    if out:
        atomic_write_text(out, text + "\n")
