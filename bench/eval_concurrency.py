"""`eval run --concurrency N`: questions/s of the WebQA eval loop against a llama.cpp server.

    python -m bench.eval_concurrency --out docs/bench/eval_concurrency.json

Starts llama.cpp's `llama-server` (on PATH, MMRAG_LLAMA_SERVER or --server) with SmolLM2 and
as many `--parallel` slots as the largest concurrency, builds the pipeline once (the sample
index, built and calibrated under var/bench if missing; `--engine openai` at that server),
then answers the sample's val questions in the full setting with the eval loop itself
(`run_items` with `WebQARunner`, a fresh checkpoint each time) at each concurrency, after one
unmeasured warm-up pass. Reports questions/s and the speedup over concurrency 1, and checks
that every concurrency wrote the same submission. Process start, model loading and scoring
are left out: they do not depend on N. Without llama-server it falls back to llama-cpp-python's
server, which answers one request at a time (the report names the server used).
`--embedded` adds the in-process llama.cpp engine at 1 and 4 (one engine lock: no gain).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import write_report  # noqa: E402
from bench.service import ensure_index, free_port  # noqa: E402

SAMPLE_JSON = REPO / "data" / "sample" / "WebQA_sample.json"


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def server_command(
    binary: str | None, gguf: Path, port: int, slots: int, threads: int, flags: list[str]
) -> tuple[list[str], str]:
    if binary:
        command = [
            binary, "--model", str(gguf), "--host", "127.0.0.1", "--port", str(port),
            "--parallel", str(slots), "--ctx-size", str(2048 * slots),
            "--threads", str(threads), "--threads-batch", str(threads), *flags,
        ]  # fmt: skip
        shown = " ".join(["llama-server", *command[7:]])
        return command, shown.replace(str(gguf), "SmolLM2.gguf")
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(gguf),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
        "--n_threads", str(threads), "--n_threads_batch", str(threads),
        "--interrupt_requests", "False",
    ]  # fmt: skip
    return command, f"llama_cpp.server (one request at a time) --n_threads {threads}"


def start(command: list[str], base_url: str, log: Path) -> subprocess.Popen:
    with log.open("wb") as sink:
        server = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"{command[0]} exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    server.terminate()
    raise SystemExit(f"{command[0]} not up in 120 s: {log.read_text()[-2000:]}")


def timed_pass(pipeline, questions, concurrency: int, workdir: Path) -> tuple[float, str]:
    """Seconds of one eval loop over `questions`, and the submission it wrote."""
    from mmrag.evaluation.runs.checkpoint import Checkpoint, run_items
    from mmrag.evaluation.runs.webqa import WebQARunner, submission

    with tempfile.TemporaryDirectory(dir=workdir) as folder:
        checkpoint = Checkpoint.open(Path(folder) / "preds.json", {"bench": "x"}, resume=False)
        runner = WebQARunner(pipeline, "full", abstain="never")
        started = time.perf_counter()
        run_items(
            questions, lambda q: q.guid, runner, checkpoint, desc="bench", concurrency=concurrency
        )
        seconds = time.perf_counter() - started
    return seconds, json.dumps(submission(questions, checkpoint.records), indent=2)


def differing(first: str, other: str) -> int:
    """How many questions' predictions (sources and answer) differ between two submissions."""
    a, b = json.loads(first), json.loads(other)
    return sum(a[guid] != b.get(guid) for guid in a)


def measure(pipeline, questions, levels: list[int], rounds: int, workdir: Path) -> list[dict]:
    timed_pass(pipeline, questions, max(levels), workdir)  # warm-up: caches, connections
    seconds: dict[int, list[float]] = {n: [] for n in levels}
    texts: dict[int, str] = {}
    for _ in range(rounds):
        for n in levels:
            took, texts[n] = timed_pass(pipeline, questions, n, workdir)
            seconds[n].append(took)
            print(f"concurrency {n}: {len(questions) / took:.2f} q/s", file=sys.stderr)
    best = {n: min(values) for n, values in seconds.items()}
    base = best[levels[0]]
    return [
        {
            "concurrency": n,
            "questions": len(questions),
            "seconds": [round(s, 2) for s in seconds[n]],
            "questions_per_s": round(len(questions) / best[n], 2),
            "speedup": round(base / best[n], 2),
            "same_submission_as_concurrency_1": texts[n] == texts[levels[0]],
            "answers_unlike_concurrency_1": differing(texts[levels[0]], texts[n]),
        }
        for n in levels
    ]


def main() -> None:
    from mmrag.core.components import build_pipeline
    from mmrag.core.settings import Settings
    from mmrag.evaluation.loaders import webqa as loader
    from mmrag.generation.engines.llamacpp import packaged_gguf

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--rounds", type=int, default=2, help="passes per concurrency; best kept")
    parser.add_argument("--limit", type=int, help="first N val questions (default all 58)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--server", help="llama-server binary (default: PATH, MMRAG_LLAMA_SERVER)")
    parser.add_argument(
        "--server-flags",
        default="",
        help='more llama-server flags, e.g. "--ubatch-size 1 --no-kv-unified" (bit-exact slots)',
    )
    parser.add_argument("--embedded", action="store_true", help="also the in-process engine")
    parser.add_argument("--workdir", type=Path, default=REPO / "var" / "bench")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    load = [round(x, 2) for x in os.getloadavg()]  # the machine may be shared: say how busy
    args.workdir.mkdir(parents=True, exist_ok=True)
    index = ensure_index(args.workdir / "service-index")
    questions = loader.load_gold_files([SAMPLE_JSON], "val", with_negatives=False)[: args.limit]
    binary = args.server or os.environ.get("MMRAG_LLAMA_SERVER") or shutil.which("llama-server")
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    command, server_name = server_command(
        binary,
        packaged_gguf(),
        port,
        max(args.concurrency),
        args.threads,
        args.server_flags.split(),
    )
    server = start(command, base_url, args.workdir / "eval-concurrency-server.log")
    try:
        settings = Settings.load(None, index=index, engine="openai", engine_url=base_url)
        runs = measure(
            build_pipeline(settings), questions, args.concurrency, args.rounds, args.workdir
        )
    finally:
        server.terminate()
        server.wait(timeout=20)
    results = {
        "machine": {
            "cpu": cpu_name(),
            "cpus": os.cpu_count(),
            "gpu": None,
            "load_average_at_start": load,
        },
        "server": server_name,
        "model": "SmolLM2-135M-Instruct Q4_1 (packaged)",
        "setting": "full, sample val questions",
        "runs": runs,
    }
    if args.embedded:
        settings = Settings.load(None, index=index, engine="llamacpp")
        results["embedded_llamacpp"] = measure(
            build_pipeline(settings), questions, [1, 4], args.rounds, args.workdir
        )
    write_report(results, args.out)


if __name__ == "__main__":
    main()
