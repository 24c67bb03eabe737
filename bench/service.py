"""Load on the running service, loopback only: throughput and latency at concurrency 1/8/32.

    python -m bench.service --out docs/bench/service.json

Starts `mmrag serve` on the sample index (built and calibrated under var/bench if missing) with
the embedded models, then for /v1/search and /v1/answer at each concurrency sends a bounded
number of requests (and stops after --max-seconds), cycling through the sample questions.
Reports requests/s, p50/p95/p99 latency of the 200s, and counts of 429s, other 4xx and 5xx.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import latency_percentiles, write_report  # noqa: E402
from mmrag.indexes.corpus.webqa import iter_questions  # noqa: E402

SAMPLE = REPO / "data" / "sample"
MMRAG = [sys.executable, "-m", "mmrag.service.cli"]


def ensure_index(folder: Path, *, ocr: bool = False) -> Path:
    """The sample index in `folder`, built and calibrated there if missing (`ocr`: with the
    text PP-OCR reads in the images, as `make serve` builds it)."""
    if not (folder / "calibration.json").is_file():
        subprocess.run(
            [
                *MMRAG,
                "index",
                "build",
                "--corpus",
                str(SAMPLE / "WebQA_sample.json"),
                "--images",
                str(SAMPLE / "imgs.tsv"),
                "--out",
                str(folder),
                "--quiet",
                *(["--ocr"] if ocr else []),
            ],
            check=True,
            cwd=REPO,
        )
        subprocess.run(
            [
                *MMRAG,
                "retrieval",
                "calibrate",
                "--index",
                str(folder),
                "--questions",
                str(SAMPLE / "WebQA_sample.json"),
            ],
            check=True,
            cwd=REPO,
        )
    return folder


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(index: Path, port: int, log: Path, workers: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with log.open("wb") as sink:
        server = subprocess.Popen(
            [
                *MMRAG,
                "serve",
                "--index",
                str(index),
                "--port",
                str(port),
                "--workers",
                str(workers),
            ],
            cwd=REPO,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"server exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    server.kill()
    raise SystemExit("server not ready in 120 s")


async def load(
    base: str, route: str, questions: list[str], concurrency: int, requests: int, max_seconds: float
) -> dict:
    latencies: list[float] = []
    statuses: list[int] = []
    counter = iter(range(requests))
    stop_at = time.monotonic() + max_seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:

        async def worker() -> None:
            for n in counter:
                if time.monotonic() > stop_at:
                    return
                began = time.perf_counter()
                try:
                    response = await client.post(
                        route, json={"question": questions[n % len(questions)]}
                    )
                    statuses.append(response.status_code)
                except httpx.HTTPError:
                    statuses.append(599)
                if statuses[-1] == 200:
                    latencies.append(time.perf_counter() - began)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    codes = np.array(statuses)
    return {
        "route": route,
        "concurrency": concurrency,
        "requests": len(statuses),
        "ok": int((codes == 200).sum()),
        "req_per_s": round(len(latencies) / elapsed, 1),
        **latency_percentiles(latencies, (50, 95, 99), digits=1),
        "status_429": int((codes == 429).sum()),
        "other_4xx": int(((codes >= 400) & (codes < 500) & (codes != 429)).sum()),
        "errors_5xx": int((codes >= 500).sum()),
    }


WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local questions = {%s}
local n = 0
request = function()
  n = n + 1
  local body = '{"question": "' .. questions[(n %% #questions) + 1] .. '"}'
  return wrk.format(nil, "%s", nil, body)
end
"""


def wrk_load(
    base: str, route: str, questions: list[str], concurrency: int, seconds: float, workdir: Path
) -> dict:
    """The same load from wrk, a C client: on 2 shared cores the Python client's own CPU
    would otherwise be counted against the server."""
    import re

    script = workdir / "wrk-post.lua"
    quoted = ", ".join('"' + q.replace('"', "'") + '"' for q in questions)
    script.write_text(WRK_SCRIPT % (quoted, route))
    output = subprocess.run(
        [
            "wrk",
            "-t1",
            f"-c{concurrency}",
            f"-d{int(seconds)}s",
            "--latency",
            "-s",
            str(script),
            base,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout

    def milliseconds(label: str) -> float:
        value, unit = re.search(rf"{label}%\s+([\d.]+)(us|ms|s)", output).groups()
        return round(float(value) * {"us": 1e-3, "ms": 1, "s": 1e3}[unit], 1)

    total = int(re.search(r"(\d+) requests in", output).group(1))
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    return {
        "route": route,
        "client": "wrk",
        "concurrency": concurrency,
        "requests": total,
        "req_per_s": float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1)),
        "p50_ms": milliseconds("50"),
        "p99_ms": milliseconds("99"),
        "non_2xx": int(non_2xx.group(1)) if non_2xx else 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--search-requests", type=int, default=2000)
    parser.add_argument("--answer-requests", type=int, default=96)
    parser.add_argument("--max-seconds", type=float, default=60)
    parser.add_argument("--workdir", type=Path, default=REPO / "var" / "bench")
    parser.add_argument("--workers", type=int, default=1, help="server processes")
    parser.add_argument(
        "--client",
        choices=["python", "wrk"],
        default="python",
        help="load generator for /v1/search (answers always use python)",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    index = ensure_index(args.workdir / "service-index")
    questions = [q.question for q in iter_questions(SAMPLE / "WebQA_sample.json")]
    port = free_port()
    server = start_server(index, port, args.workdir / "service-bench.log", args.workers)
    base = f"http://127.0.0.1:{port}"
    runs = []
    try:
        for route, requests in (
            ("/v1/search", args.search_requests),
            ("/v1/answer", args.answer_requests),
        ):
            for concurrency in args.concurrency:
                if route == "/v1/search" and args.client == "wrk":
                    result = wrk_load(base, route, questions, concurrency, 20, args.workdir)
                else:
                    result = asyncio.run(
                        load(base, route, questions, concurrency, requests, args.max_seconds)
                    )
                print(result, file=sys.stderr)
                runs.append(result)
    finally:
        server.terminate()
        server.wait(timeout=20)
    write_report(
        {"machine": {"cpus": os.cpu_count()}, "workers": args.workers, "runs": runs}, args.out
    )


if __name__ == "__main__":
    main()
