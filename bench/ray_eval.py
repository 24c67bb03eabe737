"""Eval runs in this process and on Ray: the overhead here, and what a cluster would buy.

    python -m bench.ray_eval --questions 20 58 --out docs/bench/ray-eval.json

Each run is `mmrag eval run webqa` in a fresh process over the sample's val questions in the
full setting (the sample index, built and calibrated under var/bench if missing; the embedded
SmolLM2, so every worker has its own generator), as a user runs it:

- `local`: this process, one question at a time (the default);
- `ray-local`: `--executor ray` with no address: a Ray instance of its own, a pipeline per CPU;
- `ray-cluster`: `--executor ray --ray-address` on a two-node cluster on loopback
  (`ray.cluster_utils.Cluster`, one CPU per node, started beforehand).

Two question counts split each mode's wall time into a fixed part (imports, Ray's start, the
workers loading their pipelines) and a per-question part, as bench/ray_build.py does for
builds. Every mode must write the same submission (checked). WebQA's test split (7,540
questions) is then estimated on W one-core workers, the per-question part divided among them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.build import timed_child
from bench.ray_build import each_executor, fit, hours, hours_on_workers
from bench.report import machine, write_report
from bench.service import ensure_index

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_JSON = ROOT / "data" / "sample" / "WebQA_sample.json"
WEBQA_TEST_QUESTIONS = 7_540


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, nargs=2, default=[20, 58])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--workdir", type=Path, default=ROOT / "var" / "bench")
    args = parser.parse_args()
    index = ensure_index(args.workdir / "service-index")
    results: dict = {"machine": machine(gpu="none"), "runs": {}}
    submissions: dict[tuple[str, int], bytes] = {}
    with tempfile.TemporaryDirectory() as tmp:

        def run(mode: str, flags: list[str]) -> None:
            for count in args.questions:
                out = Path(tmp) / f"{mode}-{count}.json"
                command = [sys.executable, "-m", "mmrag.service.cli", "eval", "run", "webqa"]
                command += ["--data", str(SAMPLE_JSON), "--index", str(index), "--split", "val"]
                command += ["--limit", str(count), "--out", str(out), *flags]
                figures = timed_child(command)
                figures["load_average_1m"] = round(os.getloadavg()[0], 2)
                results["runs"].setdefault(mode, {})[count] = figures
                submissions[mode, count] = out.read_bytes()
                print(json.dumps({mode: {count: figures}}), file=sys.stderr)

        each_executor(run)
    counts = args.questions
    results["same_submission_as_local"] = {
        mode: all(submissions[mode, n] == submissions["local", n] for n in counts)
        for mode in results["runs"]
    }
    runs = results["runs"]
    results["fit"] = {
        mode: fit([(n, runs[mode][n]["wall_s"]) for n in counts], per="question") for mode in runs
    }
    results["speedup_vs_local"] = {
        mode: {n: round(runs["local"][n]["wall_s"] / runs[mode][n]["wall_s"], 2) for n in counts}
        for mode in runs
    }
    local, cluster_fit = results["fit"]["local"], results["fit"]["ray-cluster"]
    results["webqa_test_estimate_hours"] = {
        "questions": WEBQA_TEST_QUESTIONS,
        "local_2_cores": hours(local["fixed_s"], local["per_question_ms"], WEBQA_TEST_QUESTIONS),
        "on_workers_of_one_core": hours_on_workers(
            cluster_fit["fixed_s"], cluster_fit["per_question_ms"], WEBQA_TEST_QUESTIONS
        ),
        "note": "embedded SmolLM2 on every worker; linear scaling assumed beyond the two "
        "measured nodes",
    }
    results["load_average_at_end"] = [round(value, 2) for value in os.getloadavg()]
    write_report(results, args.out)


if __name__ == "__main__":
    main()
