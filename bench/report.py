"""How every benchmark hands its figures over: JSON on stdout, and atomically to --out."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

import numpy as np

from mmrag.indexes.atomic import atomic_write_text


def write_report(results: dict, out: Path | None) -> None:
    text = json.dumps(results, indent=2)
    print(text)
    if out:
        atomic_write_text(out, text + "\n")


def latency_percentiles(
    seconds: list[float], points: tuple[int, ...] = (50, 99), digits: int = 3, prefix: str = ""
) -> dict[str, float]:
    """{"p50_ms": ..., "p99_ms": ...} of latencies given in seconds (NaN when there are none)."""
    ms = np.array(seconds) * 1000 if seconds else np.array([np.nan])
    return {
        f"{prefix}p{point}_ms": round(float(np.percentile(ms, point)), digits) for point in points
    }


def machine(**extra: Any) -> dict[str, Any]:
    """What ran a benchmark, as every report records it, with what one adds of its own."""
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
        **extra,
    }
