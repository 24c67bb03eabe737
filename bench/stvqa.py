"""ST-VQA answer modes compared: free writing vs choosing among the OCR spans.

Draws the procedural scene-text set (bench/scene_text.py), OCRs it once (a shared cache), then
runs `mmrag eval run stvqa` with each `--answer` mode and scores each submission with
`mmrag eval score stvqa`. The figures are in docs/BENCHMARKS.md.

Usage: python -m bench.stvqa --work DIR [--images 60] [--out docs/bench/stvqa-answer-modes.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.report import write_report
from mmrag.generation.scene_text import ANSWER_MODES

MMRAG = [sys.executable, "-m", "mmrag.service.cli"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--images", type=int, default=60)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    here = Path(__file__).parent
    subprocess.run(
        [sys.executable, str(here / "scene_text.py"), "--out", str(args.work),
         "--images", str(args.images)],
        check=True,
    )  # fmt: skip
    data = args.work / "ST-VQA_synthetic.json"
    results: dict = {"data": f"bench/scene_text.py --images {args.images} --seed 0", "modes": {}}
    for mode in ANSWER_MODES:
        out = args.work / f"{mode}.json"
        started = time.perf_counter()
        subprocess.run(
            [*MMRAG, "eval", "run", "stvqa", "--data", str(data), "--images", str(args.work),
             "--out", str(out), "--answer", mode, "--ocr-cache", str(args.work / "ocr.jsonl")],
            check=True,
        )  # fmt: skip
        seconds = time.perf_counter() - started
        scored = subprocess.run(
            [*MMRAG, "eval", "score", "stvqa", "--gold", str(data), "--pred", str(out)],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        results["modes"][mode] = {**json.loads(scored.stdout), "seconds": round(seconds, 1)}
    write_report(results, args.out)


if __name__ == "__main__":
    main()
