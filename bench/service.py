"""Load on the running service, loopback only: throughput and latency at concurrency 1/8/32.

    python -m bench.service --out docs/bench/service.json

Starts `mmrag serve` on the sample index (built and calibrated under var/bench if missing) with
the embedded models, then for /v1/search and /v1/answer at each concurrency sends a bounded
number of requests (and stops after --max-seconds), cycling through the sample questions.
Reports requests/s, p50/p95/p99 latency of the 200s, and counts of 429s, other 4xx and 5xx.
With --first-token, answers are also asked for as server-sent events (`stream: true`), and the
client's time to the first `token` event (retrieval, selection and the prompt included: what a
user waits for) is reported beside the whole answer's, with the server's own split of it
(`first_token_s` from the start of generation, `retrieve_s`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
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


async def drive(
    base: str,
    questions: list[str],
    concurrency: int,
    requests: int,
    max_seconds: float,
    ask: Callable[[httpx.AsyncClient, str], Awaitable[int]],
) -> tuple[np.ndarray, float]:
    """`concurrency` clients ask up to `requests` questions in turn, for at most
    `max_seconds`; `ask(client, question)` sends one and returns its status (599: no answer).
    Returns every status and the seconds it took."""
    statuses: list[int] = []
    counter = iter(range(requests))
    stop_at = time.monotonic() + max_seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    async with httpx.AsyncClient(base_url=base, timeout=120, limits=limits) as client:

        async def worker() -> None:
            for n in counter:
                if time.monotonic() > stop_at:
                    return
                try:
                    statuses.append(await ask(client, questions[n % len(questions)]))
                except httpx.HTTPError:
                    statuses.append(599)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return np.array(statuses), time.perf_counter() - started


async def load(
    base: str, route: str, questions: list[str], concurrency: int, requests: int, max_seconds: float
) -> dict:
    latencies: list[float] = []

    async def ask(client: httpx.AsyncClient, question: str) -> int:
        began = time.perf_counter()
        response = await client.post(route, json={"question": question})
        if response.status_code == 200:
            latencies.append(time.perf_counter() - began)
        return response.status_code

    codes, elapsed = await drive(base, questions, concurrency, requests, max_seconds, ask)
    return {
        "route": route,
        "concurrency": concurrency,
        "requests": len(codes),
        "ok": int((codes == 200).sum()),
        "req_per_s": round(len(latencies) / elapsed, 1),
        **latency_percentiles(latencies, (50, 95, 99), digits=1),
        "status_429": int((codes == 429).sum()),
        "other_4xx": int(((codes >= 400) & (codes < 500) & (codes != 429)).sum()),
        "errors_5xx": int((codes >= 500).sum()),
    }


async def streamed_load(
    base: str, questions: list[str], concurrency: int, requests: int, max_seconds: float
) -> dict:
    """/v1/answer as server-sent events: time to the first token event and to the answer."""
    first, whole, generation_first, retrieve = [], [], [], []

    async def ask(client: httpx.AsyncClient, question: str) -> int:
        began, first_at, event = time.perf_counter(), None, ""
        body = {"question": question, "stream": True}
        async with client.stream("POST", "/v1/answer", json=body) as response:
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                    if event == "token" and first_at is None:
                        first_at = time.perf_counter() - began
                elif line.startswith("data: ") and event == "answer":
                    timings = json.loads(line[6:]).get("timings", {})
                    generation_first.append(timings.get("first_token_s", 0.0))
                    retrieve.append(timings.get("retrieve_s", 0.0))
        if response.status_code == 200:
            whole.append(time.perf_counter() - began)
            if first_at is not None:
                first.append(first_at)
        return response.status_code

    codes, elapsed = await drive(base, questions, concurrency, requests, max_seconds, ask)
    return {
        "route": "/v1/answer (stream)",
        "concurrency": concurrency,
        "requests": len(codes),
        "ok": int((codes == 200).sum()),
        "answers_per_s": round(len(whole) / elapsed, 2),
        **latency_percentiles(whole, (50, 95), digits=1),
        **latency_percentiles(first, (50, 95), digits=1, prefix="first_token_"),
        **latency_percentiles(generation_first, (50,), digits=1, prefix="server_first_token_"),
        **latency_percentiles(retrieve, (50,), digits=1, prefix="server_retrieve_"),
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
    parser.add_argument(
        "--index", type=Path, help="an index to serve (default: the sample's, built under workdir)"
    )
    parser.add_argument(
        "--first-token",
        action="store_true",
        help="also stream answers (SSE) and time the first token at each concurrency",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    index = args.index or ensure_index(args.workdir / "service-index")
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
        for concurrency in args.concurrency if args.first_token else []:
            result = asyncio.run(
                streamed_load(base, questions, concurrency, args.answer_requests, args.max_seconds)
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
