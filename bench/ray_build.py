"""Index builds with the local executor and on Ray: the overhead here, and the full-release cost.

    python -m bench.ray_build --sizes 2000 6000 --out docs/bench/ray-build.json

Each build is `mmrag index build` in a fresh process (BM25 + the packaged MiniLM over a
synthetic corpus of WebQA's shape, bench/synthetic.py), as a user runs it:

- `local`: the default executor;
- `ray-local`: `--executor ray` with no address, so the build starts (and stops) a Ray
  instance on this machine, as a first try of the option does;
- `ray-cluster`: `--executor ray --ray-address` on a two-node cluster on loopback
  (`ray.cluster_utils.Cluster`, one CPU per node, started beforehand).

Two corpus sizes split each mode's time into a fixed part (imports, Ray start, actors loading
their model) and a per-source part: t = fixed + per_source * n. The full WebQA release
(540K snippets + 390K captions) is then estimated as fixed + per_source * 930K, and divided
among W workers for the cluster's per-source part, the scaling Ray Data gives an embarrassingly
parallel map (not measured beyond two nodes here). OCR's per-image cost is taken from
docs/bench/ocr.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.build import timed_child
from bench.report import machine, write_report
from bench.synthetic import write_corpus

ROOT = Path(__file__).resolve().parents[1]
WEBQA_SOURCES = 930_000  # 540K snippets + 390K image captions
WEBQA_IMAGES = 390_000
LOOPBACK_ONLY = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


WORKER_COUNTS = (2, 16, 64)  # one-core workers the full-size estimates are given for


def fit(points: list[tuple[int, float]], per: str = "source") -> dict:
    """fixed + per_item * n through the two sizes' wall times (key `per_{per}_ms`)."""
    (n1, t1), (n2, t2) = points
    per_item = (t2 - t1) / (n2 - n1)
    return {"fixed_s": round(t1 - per_item * n1, 1), f"per_{per}_ms": round(per_item * 1000, 3)}


def hours(fixed_s: float, per_item_ms: float, items: int, share: float = 1.0) -> float:
    """fixed + per_item * items, the per-item part times `share` (of the workers' work)."""
    return round((fixed_s + per_item_ms / 1000 * items * share) / 3600, 2)


def hours_on_workers(fixed_s: float, per_item_ms: float, items: int) -> dict[int, float]:
    """The per-item cost was measured on two one-core workers (one worker's is twice it),
    divided among W workers: linear scaling, assumed beyond the two nodes measured."""
    return {w: hours(fixed_s, per_item_ms, items, 2 / w) for w in WORKER_COUNTS}


def each_executor(measure: Callable[[str, list[str]], None]) -> None:
    """`measure(mode, flags)` for the three ways a command runs: `local` (the default),
    `ray-local` (`--executor ray`, a Ray instance of its own), and `ray-cluster` on a
    two-node cluster on loopback (one CPU per node), started here beforehand."""
    from ray.cluster_utils import Cluster

    os.environ.update(LOOPBACK_ONLY)
    measure("local", [])
    measure("ray-local", ["--executor", "ray"])
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        measure("ray-cluster", ["--executor", "ray", "--ray-address", cluster.address])
    finally:
        cluster.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs=2, default=[2000, 6000])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    results: dict = {"machine": machine(gpu="none"), "builds": {}}
    with tempfile.TemporaryDirectory() as tmp:
        corpora = {
            size: write_corpus(Path(tmp) / f"corpus-{size}.jsonl", size) for size in args.sizes
        }

        def build(mode: str, flags: list[str]) -> None:
            for size, corpus in corpora.items():
                out = Path(tmp) / f"index-{mode}-{size}"
                command = [sys.executable, "-m", "mmrag.service.cli", "index", "build"]
                command += ["--corpus", str(corpus), "--out", str(out), "--quiet", *flags]
                figures = timed_child(command)
                figures["load_average_1m"] = round(os.getloadavg()[0], 2)
                results["builds"].setdefault(mode, {})[size] = figures
                print(json.dumps({mode: {size: figures}}), file=sys.stderr)

        each_executor(build)
    sizes = args.sizes
    fits = {
        mode: fit([(size, runs[size]["wall_s"]) for size in sizes])
        for mode, runs in results["builds"].items()
    }
    results["fit"] = fits
    results["overhead_vs_local"] = {
        mode: {
            size: round(runs[size]["wall_s"] / results["builds"]["local"][size]["wall_s"], 2)
            for size in sizes
        }
        for mode, runs in results["builds"].items()
    }
    ocr = json.loads((ROOT / "docs" / "bench" / "ocr.json").read_text())
    ocr_per_image_core_s = 1 / ocr["ocr_throughput"]["single_thread_per_image"]["images_per_s"]
    cluster_fit = fits["ray-cluster"]
    results["webqa_release_estimate"] = {
        "sources": WEBQA_SOURCES,
        "images": WEBQA_IMAGES,
        "minilm_hours_local_2_cores": hours(
            fits["local"]["fixed_s"], fits["local"]["per_source_ms"], WEBQA_SOURCES
        ),
        "minilm_hours_on_workers_of_one_core": hours_on_workers(
            cluster_fit["fixed_s"], cluster_fit["per_source_ms"], WEBQA_SOURCES
        ),
        "ocr_hours_on_workers_of_one_core": {
            workers: hours(0, ocr_per_image_core_s * 1000, WEBQA_IMAGES, 1 / workers)
            for workers in WORKER_COUNTS
        },
        "note": "per-source cost measured on two one-CPU nodes of one 2-core machine, "
        "divided among W one-core workers (linear scaling assumed, not measured beyond two "
        "nodes); OCR at docs/bench/ocr.json's single-thread rate per core",
    }
    results["load_average_at_end"] = [round(value, 2) for value in os.getloadavg()]
    write_report(results, args.out)


if __name__ == "__main__":
    main()
