"""Cold start of the CLI: `mmrag search` and `mmrag ask` in a fresh process on the default index.

    python -m bench.startup --runs 7 --out docs/bench/startup.json

The default index is what `make serve` builds (BM25 + the packaged MiniLM over captions,
snippets and the text PP-OCR reads in the images, calibrated on the sample's questions); it is
built under var/bench/startup-index when missing. Each command runs once untimed (it warms the
page cache and, on a new machine, exports MiniLM to ONNX), then --runs times, each in a fresh
interpreter; reported: p50, min and max wall seconds, and which heavy modules the command
imports (one more run under `-X importtime`). Each heavy module's own cold import time is
measured alone.

With --compare, the same sample questions are also searched and answered in this process with
MiniLM on onnxruntime (the query path) and on sentence-transformers (torch), and the report
counts questions whose top-10 or answer differ.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import machine, write_report  # noqa: E402
from bench.service import MMRAG, SAMPLE, ensure_index  # noqa: E402

HEAVY = (
    "torch",
    "sentence_transformers",
    "transformers",
    "sklearn",
    "ray",
    "fastapi",
    "spacy",
    "onnxruntime",
    "tokenizers",
    "llama_cpp",
    "rapidocr_onnxruntime",
    "faiss",
)
SEARCH_QUESTION = "What color is the door of the Harbor Inn?"


def run_fresh(command: list[str], *flags: str) -> tuple[float, str]:
    """Wall seconds of one fresh process running `command`, and its stderr."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *flags, *command[1:]],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[3:])} failed: {done.stderr[-2000:]}")
    return seconds, done.stderr


def heavy_imports(command: list[str]) -> list[str]:
    """The heavy top-level modules `command` imports (one more run, with -X importtime)."""
    _, stderr = run_fresh(command, "-X", "importtime")
    top = re.findall(r"^import time:\s+\d+ \|\s+\d+ \| (\S+)$", stderr, re.M)
    return sorted(name for name in HEAVY if name in top)


def cold_command(command: list[str], runs: int) -> dict:
    run_fresh(command)  # page cache, and the one ONNX export of a new machine
    seconds = [run_fresh(command)[0] for _ in range(runs)]
    return {
        "p50_s": round(statistics.median(seconds), 3),
        "min_s": round(min(seconds), 3),
        "max_s": round(max(seconds), 3),
        "runs": runs,
        "heavy_modules_imported": heavy_imports(command),
    }


def import_seconds(module: str, runs: int = 3) -> float:
    """Median wall time of `python -c "import MODULE"`, less the bare interpreter's."""

    def once(code: str) -> float:
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        return time.perf_counter() - started

    bare = statistics.median(once("pass") for _ in range(runs))
    return round(statistics.median(once(f"import {module}") for _ in range(runs)) - bare, 3)


def compare_encoders(index: Path) -> dict:
    """Top-10 and answers of every sample question with MiniLM on onnxruntime and on torch."""
    from mmrag.core.components import build_pipeline
    from mmrag.core.settings import Settings
    from mmrag.indexes.corpus.webqa import iter_questions
    from mmrag.indexes.encoders import loading

    questions = [q.question for q in iter_questions(SAMPLE / "WebQA_sample.json")]

    def run() -> tuple[list[list[str]], list[str]]:
        pipeline = build_pipeline(Settings(index=index))
        tops = [[c.source.id for c in pipeline.retriever.search(q, 10)] for q in questions]
        return tops, [pipeline.answer(q).answer.text for q in questions]

    fast_tops, fast_answers = run()
    loading._text_encoder.cache_clear()
    loading.load_onnx_encoder = lambda *_, **__: None  # no export: sentence-transformers
    torch_tops, torch_answers = run()
    return {
        "questions": len(questions),
        "top10_differ": sum(a != b for a, b in zip(fast_tops, torch_tops, strict=True)),
        "answers_differ": sum(a != b for a, b in zip(fast_answers, torch_answers, strict=True)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, default=REPO / "var" / "bench" / "startup-index")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--compare", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    index = ensure_index(args.index, ocr=True)
    search = [*MMRAG, "search", SEARCH_QUESTION, "--index", str(index)]
    ask = [*MMRAG, "ask", SEARCH_QUESTION, "--index", str(index)]
    results = {
        "command": " ".join(sys.argv),
        "machine": machine(),
        "index": "sample corpus: BM25 + MiniLM over captions, snippets and OCR text, calibrated",
        "search": cold_command(search, args.runs),
        "ask": cold_command(ask, args.runs),
        "import_s": {module: import_seconds(module) for module in HEAVY},
    }
    if args.compare:
        results["onnx_vs_torch"] = compare_encoders(index)
    write_report(results, args.out)


if __name__ == "__main__":
    main()
