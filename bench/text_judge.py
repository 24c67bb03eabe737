"""What the text judge costs per claim, and what SmolLM2-135M's verdicts are worth.

    python -m bench.text_judge --pairs 20 --batch 4 --out docs/bench/text-judge-cpu.json

A claim whose text score the verifier is unsure of is put to the LM judge (`LMJudge.entails`):
one forward pass over a prompt holding the cited text (cut to 2,000 characters), the question
and the claim; no decoding. This times that pass with the packaged SmolLM2-135M through
llama.cpp, in process and behind `python -m llama_cpp.server` on loopback: seconds per claim
asked one at a time, and asked --batch at a time (`LMJudge.answer_all`: concurrent requests,
as the attributor asks the questions about one claim). llama.cpp keeps one sequence: the
in-process engine serialises calls under its lock, and llama-cpp-python's server serialises
requests, so batching buys little there; engines that batch (transformers, vLLM) read a batch
in one pass.

The claims are AttributionBench's development pairs (`../shared/data/attributionbench/
dev.jsonl`, read there, never copied): the first --pairs of each label, balanced, with their
first reference as the cited text. Their labels also score the judge (accuracy at P(yes) 0.5,
the share it says yes to, ROC AUC of P(yes)), which is why the default setup never asks the
135M model.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import latency_percentiles, machine, write_report  # noqa: E402
from mmrag.generation import AnswerWriter, LMJudge, load_engine  # noqa: E402
from mmrag.generation.judge import Entails  # noqa: E402

DEV = REPO.parent / "shared" / "data" / "attributionbench" / "dev.jsonl"


def load_pairs(path: Path, per_label: int) -> list[tuple[Entails, bool]]:
    """The first `per_label` pairs of each label, in file order, as judge questions."""
    if not path.is_file():
        raise SystemExit(f"{path}: not found (AttributionBench's dev split, in ../shared/data)")
    taken: dict[bool, list[tuple[Entails, bool]]] = {True: [], False: []}
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        label = row["attribution_label"] == "attributable"
        if len(taken[label]) < per_label and row["references"]:
            ask = Entails(row["question"], row["claim"], row["references"][0])
            taken[label].append((ask, label))
    return [pair for both in zip(taken[True], taken[False], strict=True) for pair in both]


@contextmanager
def llama_server(threads: int):
    """`python -m llama_cpp.server` with the packaged GGUF on a loopback port: its /v1 URL."""
    from mmrag.generation.engines.llamacpp import packaged_gguf
    from tests.helpers import free_port, running_process

    port = free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(packaged_gguf()),
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096",
        "--n_threads", str(threads), "--n_threads_batch", str(threads),
    ]  # fmt: skip
    base_url = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "server.log"
        with running_process(command, f"{base_url}/models", log, timeout_s=180):
            yield base_url


def timed(judge: LMJudge, asks: Sequence[Entails], batch: int) -> tuple[dict, list]:
    """Seconds per claim one at a time (each claim's latency) and `batch` at a time (a
    batch's wall time over its claims); P(yes) of each, from the one-at-a-time pass."""
    judge.entails(asks[0].question, asks[0].claim, asks[0].evidence)  # warm-up
    alone, said = [], []
    for ask in asks:
        started = time.perf_counter()
        said.append(judge.answer(ask))
        alone.append(time.perf_counter() - started)
    started = time.perf_counter()
    for at in range(0, len(asks), batch):
        judge.answer_all(asks[at : at + batch])
    batched = (time.perf_counter() - started) / len(asks)
    figures = {
        "one_at_a_time_s_per_claim": round(statistics.mean(alone), 3),
        **latency_percentiles(alone, (50, 90), prefix="one_at_a_time_"),
        f"batched_{batch}_s_per_claim": round(batched, 3),
    }
    return figures, said


def answer_times(engine, asks: Sequence[Entails], count: int) -> dict:
    """What writing an answer costs on the same engine, for scale: the claim's question over
    its cited text as the one source, to the end of the first sentence."""

    class Cited:
        id, modality, title = "ref", "text", ""

        def __init__(self, text: str) -> None:
            self.text = text

    writer = AnswerWriter(engine, guided=False)
    seconds = []
    for ask in asks[:count]:
        started = time.perf_counter()
        writer.write(ask.question, [Cited(ask.evidence)])
        seconds.append(time.perf_counter() - started)
    return {"answers": len(seconds), "answer_s_mean": round(statistics.mean(seconds), 3)}


def auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """P(a supported claim scores above an unsupported one), ties half."""
    pos = [s for s, label in zip(scores, labels, strict=True) if label]
    neg = [s for s, label in zip(scores, labels, strict=True) if not label]
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return round(wins / (len(pos) * len(neg)), 3)


def quality(said: Sequence[float | None], labels: Sequence[bool]) -> dict:
    decided = [(p, label) for p, label in zip(said, labels, strict=True) if p is not None]
    scores = [0.5 if p is None else p for p in said]
    return {
        "undecided": len(said) - len(decided),
        "accuracy_at_0.5": round(sum((p >= 0.5) == label for p, label in decided) / len(said), 3),
        "share_judged_yes": round(sum(p >= 0.5 for p, _ in decided) / len(said), 3),
        "roc_auc": auc(scores, labels),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEV)
    parser.add_argument("--pairs", type=int, default=24, help="pairs of each label")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="llama.cpp threads (one: on a busy machine more spin on their barriers)",
    )
    parser.add_argument("--answers", type=int, default=10, help="answers timed, for scale")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    ran_on = machine()
    pairs = load_pairs(args.data, args.pairs)
    asks, labels = [ask for ask, _ in pairs], [label for _, label in pairs]
    # No timeout: every claim is timed to its answer, however busy the machine.
    engine = load_engine("llamacpp", n_threads=args.threads)
    local, said = timed(LMJudge(engine, timeout_s=None), asks, args.batch)
    local |= answer_times(engine, asks, args.answers)
    with llama_server(args.threads) as url:
        served_judge = LMJudge(load_engine("openai", base_url=url), timeout_s=None)
        served, _ = timed(served_judge, asks, args.batch)
    results = {
        "command": " ".join(sys.argv),
        "machine": ran_on,
        "model": "SmolLM2-135M-Instruct Q4_1 (packaged GGUF)",
        "claims": len(asks),
        "evidence_chars_median": statistics.median(len(ask.evidence) for ask in asks),
        "llamacpp_in_process": local,
        "llama_cpp_server": served,
        "judge_quality": quality(said, labels),
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
    }
    write_report(results, args.out)


if __name__ == "__main__":
    main()
