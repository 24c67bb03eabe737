"""Cancelling a long prompt in the embedded llama.cpp engine: prefill speed and stop latency by
`n_batch`.

    python -m bench.prefill_cancel --runs 7 --out docs/bench/prefill-cancel.json

The prompt is the answer prompt over --sources text snippets of the sample corpus (about 2,000
tokens at 36), read by the packaged SmolLM2 from an empty KV cache. For each `n_batch` the
engine reads it --runs times in full (prefill seconds, prompt tokens per second, seconds per
decode call), then --runs times again with `cancelled` turning true at offsets spread evenly
over the prefill: the stop latency is from that moment to the engine's GenerationCancelled.
Before cancellation was asked between batches, a cancelled prompt was read to its end, so the
worst case was the whole prefill. The `n_batch` values take turns, run by run, so load from
other processes falls on each alike; --busy N runs N spinning processes meanwhile, as a server
answering other requests would (llama.cpp's prompt threads spin at barriers, so one busy core
of two slows them far more than by half).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import latency_percentiles, machine, write_report  # noqa: E402
from mmrag.generation.engines.base import Message  # noqa: E402
from mmrag.generation.engines.llamacpp import LlamaCppEngine  # noqa: E402
from mmrag.generation.errors import GenerationCancelled  # noqa: E402
from mmrag.generation.prompts import answer_messages  # noqa: E402

SAMPLE_JSON = REPO / "data" / "sample" / "WebQA_sample.json"
QUESTION = "When was the lighthouse of Dunmore built?"


@dataclass(frozen=True)
class Snippet:
    id: str
    modality: str
    title: str
    text: str


def long_prompt(count: int) -> list[Message]:
    """The answer prompt over the sample corpus's first `count` distinct text snippets."""
    snippets: dict[str, Snippet] = {}
    for question in json.loads(SAMPLE_JSON.read_text()).values():
        for fact in question["txt_posFacts"] + question["txt_negFacts"]:
            snippets.setdefault(
                fact["snippet_id"], Snippet(fact["snippet_id"], "text", fact["title"], fact["fact"])
            )
    return answer_messages(QUESTION, list(snippets.values())[:count])


def read_prompt(
    engine: LlamaCppEngine, messages: list[Message], cancelled: Callable[[], bool] | None
) -> None:
    """The prompt from an empty cache and one token, so prefill is nearly all the work."""
    engine.llm.reset()
    for _ in engine.stream(messages, max_tokens=1, cancelled=cancelled):
        pass


def full_prefill(engine: LlamaCppEngine, messages: list[Message]) -> tuple[float, list[float]]:
    """Seconds of the whole prefill, and of each decode call (one per batch of the prompt)."""
    stamps: list[float] = []

    def stamp() -> bool:
        stamps.append(time.perf_counter())
        return False

    started = time.perf_counter()
    read_prompt(engine, messages, stamp)
    ended = time.perf_counter()
    return ended - started, [b - a for a, b in zip(stamps, [*stamps[1:], ended], strict=True)]


def stop_latency(engine: LlamaCppEngine, messages: list[Message], after_s: float) -> float | None:
    """Seconds from `cancelled` turning true `after_s` into the prefill to the engine stopping;
    None when the prompt was read before that."""
    wanted = threading.Event()
    cancelled_at: list[float] = []

    def cancel() -> None:
        cancelled_at.append(time.perf_counter())
        wanted.set()

    timer = threading.Timer(after_s, cancel)
    timer.start()
    try:
        read_prompt(engine, messages, wanted.is_set)
    except GenerationCancelled:
        return time.perf_counter() - cancelled_at[0]
    finally:
        timer.cancel()
    return None


def compare(batches: list[int], sources: int, runs: int) -> dict:
    messages = long_prompt(sources)
    engines = {n: LlamaCppEngine(n_ctx=4096, n_batch=n) for n in batches}
    first = engines[batches[0]]
    read_prompt(first, messages, None)  # page cache, and the prompt's length
    prompt_tokens = first.llm.n_tokens
    prefill: dict[int, list[float]] = {n: [] for n in batches}
    per_batch: dict[int, list[float]] = {n: [] for n in batches}
    for run in range(runs):
        for n in batches[run % 2 :] + batches[: run % 2]:  # take turns at going first
            seconds, calls = full_prefill(engines[n], messages)
            prefill[n].append(seconds)
            per_batch[n].extend(calls)
    stops: dict[int, list[float]] = {n: [] for n in batches}
    finished = dict.fromkeys(batches, 0)
    for run in range(runs):
        for n in batches[run % 2 :] + batches[: run % 2]:
            latency = stop_latency(
                engines[n], messages, statistics.median(prefill[n]) * (run + 0.5) / runs
            )
            if latency is None:
                finished[n] += 1
            else:
                stops[n].append(latency)
    return {
        "prompt_tokens": prompt_tokens,
        "n_batch": {
            str(n): {
                "prefill_p50_s": round(statistics.median(prefill[n]), 3),
                "prefill_max_s": round(max(prefill[n]), 3),
                "prompt_tokens_per_s_p50": round(prompt_tokens / statistics.median(prefill[n]), 1),
                "decode_calls": len(per_batch[n]) // runs,
                "decode_call_p50_s": round(statistics.median(per_batch[n]), 3),
                "decode_call_max_s": round(max(per_batch[n]), 3),
                "stop_latency": {
                    **latency_percentiles(stops[n], (50, 100)),
                    "cancelled": len(stops[n]),
                    "read_to_the_end_first": finished[n],
                },
            }
            for n in batches
        },
    }


@contextmanager
def busy_cores(n: int) -> Iterator[None]:
    """`n` processes spinning on a core each while the block runs."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[512, 256])
    parser.add_argument("--sources", type=int, default=36)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--busy", type=int, default=0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    measured_on = machine(busy_processes=args.busy)
    with busy_cores(args.busy):
        measured = compare(args.batches, args.sources, args.runs)
    results = {
        "command": " ".join(sys.argv),
        "machine": measured_on,
        "model": "packaged SmolLM2-135M-Instruct Q4_1, n_ctx 4096, llama-cpp-python "
        + importlib.metadata.version("llama-cpp-python"),
        **measured,
    }
    write_report(results, args.out)


if __name__ == "__main__":
    main()
