"""A text verifier scored on real claims and on ours: AttributionBench's development split, the
332 held-out pairs and the invented test set (issue 39).

    .venv/bin/python -m bench.attribution_dev --verifier lexical

Three sets, each pair judged as `Attributor.judgement` judges a text source:
`support(question, claim, evidence) >= threshold`.

(a) AttributionBench's development split, `../shared/data/attributionbench/dev.jsonl`: 1,198
    label-balanced claims written by real LLMs over real web pages (ExpertQA, Stanford-
    GenSearch, AttributedQA, LFQA), labelled by people "attributable" or "not attributable";
    each claim's `references` (1-4 texts) are read together as its evidence. Its repository
    states no licence, so it is read from `../shared` and never copied here; without it this set
    is skipped with a message. It is split once, deterministically, into a part to fit on and a
    held-out part that is only ever reported (`fit_part()` / `heldout_part()`; the rule is
    `split`'s docstring); it is scored in full and the figures given for all three.
(b) `bench/data/verifier_heldout.jsonl`: the 332 pairs written last round, outside the sample.
(c) `bench/data/invented_test.jsonl`: one-sentence answers in the embedded model's style, right
    or with one invented word, number, name or clause (its twin `invented_fit.jsonl` is for
    fitting and is not scored here).

For each: macro-F1 over the two labels, accuracy, the share judged supported, per source
dataset (a) or per kind (b, c), and mean seconds a pair, wall clock and this process's CPU time
(the latter less swayed by other work on shared cores; the verifier's first call, which loads
its models, is made and timed apart). `--verifier` is any spec the service accepts
(`lexical`, `nli:NAME`), built as the pipeline builds it (`core.components.build_attributor`);
`--factory module:callable` plugs in any other object with the same
`support(question, claim, evidence) -> float`, and `--threshold` sets its cut. The report goes
atomically to `docs/bench/attribution-dev-<name>.json`.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple, Protocol

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import machine, write_report  # noqa: E402
from bench.verifier_accuracy import load_pairs  # noqa: E402

DEV = REPO.parent / "shared" / "data" / "attributionbench" / "dev.jsonl"
HELD_OUT = REPO / "bench" / "data" / "verifier_heldout.jsonl"
INVENTED_TEST = REPO / "bench" / "data" / "invented_test.jsonl"
FIT_SHARE = 0.6
LABELS = {"attributable": True, "not attributable": False}
SLOWEST = 5  # dev pairs listed with their time: long references cost far more than the mean


class Judged(NamedTuple):
    score: float
    seconds: float  # wall clock: inflated when other work shares the cores
    cpu_seconds: float  # this process's CPU time, all its threads: less sensitive to that


class TextVerifier(Protocol):
    def support(self, question: str, claim: str, evidence: list[str]) -> float: ...


def _dev_rows(path: Path) -> list[dict]:
    """The split's rows, each with `supported` (bool) read from its `attribution_label`."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: AttributionBench's dev split is not there")
    rows = []
    for line, row in enumerate(load_pairs(path), 1):
        label = row.get("attribution_label")
        if label not in LABELS:
            raise ValueError(f"{path}:{line}: unknown attribution_label {label!r}")
        rows.append({**row, "supported": LABELS[label]})
    return rows


def _claim_key(row: dict) -> str:
    return hashlib.sha256(f"{row['question']}\n{row['claim']}".encode()).hexdigest()


def split(rows: list[dict], fit_share: float = FIT_SHARE) -> tuple[list[dict], list[dict]]:
    """(fit, held-out): about `fit_share` of each source dataset's rows of each label to fit.

    Rows are grouped by question and claim (the same claim recurs over other references, in
    Stanford-GenSearch and AttributedQA sometimes with the other label), so a claim lies on
    one side only. Within each source dataset the groups are taken in the order of the SHA-256
    of "question\\nclaim"; a group goes to the fit part while that leaves each of its labels at
    most round(fit_share x the dataset's rows of that label) there, else to the held-out part.
    The rule reads nothing but the rows' own text, so it is the same on every machine and run.
    """
    fit, held_out = [], []
    by_dataset: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        by_dataset[row["src_dataset"]][_claim_key(row)].append(row)
    for dataset in sorted(by_dataset):
        groups = by_dataset[dataset]
        totals = Counter(row["supported"] for group in groups.values() for row in group)
        quota = {label: round(fit_share * n) for label, n in totals.items()}
        taken: Counter[bool] = Counter()
        for key in sorted(groups):
            labels = Counter(row["supported"] for row in groups[key])
            if all(taken[label] + n <= quota[label] for label, n in labels.items()):
                taken.update(labels)
                fit += groups[key]
            else:
                held_out += groups[key]
    return fit, held_out


def fit_part(path: Path = DEV) -> list[dict]:
    """The development rows a verifier may be fitted on (each with `supported`)."""
    return split(_dev_rows(path))[0]


def heldout_part(path: Path = DEV) -> list[dict]:
    """The development rows that are only ever reported, never fitted on."""
    return split(_dev_rows(path))[1]


def metrics(truth: list[bool], said: list[bool], judged: list[Judged]) -> dict:
    from sklearn.metrics import accuracy_score, f1_score

    return {
        "n": len(truth),
        "supported": sum(truth),
        "macro_f1": round(float(f1_score(truth, said, average="macro", zero_division=0)), 3),
        "accuracy": round(float(accuracy_score(truth, said)), 3),
        "judged_supported": round(sum(said) / len(said), 3),
        "mean_s_per_pair": round(sum(j.seconds for j in judged) / len(judged), 3),
        "mean_cpu_s_per_pair": round(sum(j.cpu_seconds for j in judged) / len(judged), 3),
    }


def scored(pairs: list[dict], judged: list[Judged], threshold: float, by: str) -> dict:
    """Figures overall and per value of `by` (a field of the pairs)."""
    said = [j.score >= threshold for j in judged]
    truth = [pair["supported"] for pair in pairs]
    groups: dict[str, list[int]] = defaultdict(list)
    for i, pair in enumerate(pairs):
        groups[pair[by]].append(i)
    return {
        **metrics(truth, said, judged),
        "median_s_per_pair": round(statistics.median(j.seconds for j in judged), 3),
        "max_s_per_pair": round(max(j.seconds for j in judged), 3),
        f"per_{by}": {
            value: metrics([truth[i] for i in at], [said[i] for i in at], [judged[i] for i in at])
            for value, at in sorted(groups.items())
        },
    }


def judge(verifier: TextVerifier, items: list[tuple[str, str, list[str]]]) -> list[Judged]:
    """Each (question, claim, evidence)'s score and cost, in order; progress on stderr."""
    out = []
    for done, (question, claim, evidence) in enumerate(items, 1):
        wall, cpu = time.perf_counter(), time.process_time()
        score = float(verifier.support(question, claim, evidence))
        out.append(Judged(score, time.perf_counter() - wall, time.process_time() - cpu))
        if done % 100 == 0:
            print(f"judged {done}/{len(items)}", file=sys.stderr, flush=True)
    return out


def score_dev(verifier: TextVerifier, threshold: float, path: Path, held_out_only: bool) -> dict:
    rows = _dev_rows(path)
    fit, held_out = split(rows)
    parts = (
        {"held_out": held_out}
        if held_out_only
        else {"held_out": held_out, "fit": fit, "full": rows}
    )
    rows = held_out if held_out_only else rows
    judged = judge(verifier, [(r["question"], r["claim"], r["references"]) for r in rows])
    by_id = dict(zip((r["id"] for r in rows), judged, strict=True))
    return {
        "path": str(path),
        "split": {
            "rule": " ".join((split.__doc__ or "").split()),
            "fit_share": FIT_SHARE,
            "fit": len(fit),
            "held_out": len(held_out),
        },
        **{
            name: scored(part, [by_id[r["id"]] for r in part], threshold, "src_dataset")
            for name, part in parts.items()
        },
        "slowest": [
            {
                "id": row["id"],
                "references_chars": sum(map(len, row["references"])),
                "seconds": round(by_id[row["id"]].seconds, 2),
                "cpu_seconds": round(by_id[row["id"]].cpu_seconds, 2),
            }
            for row in sorted(rows, key=lambda r: -by_id[r["id"]].seconds)[:SLOWEST]
        ],
    }


def score_pairs(verifier: TextVerifier, threshold: float, path: Path) -> dict:
    pairs = load_pairs(path)
    judged = judge(verifier, [(p["question"], p["claim"], [p["evidence"]]) for p in pairs])
    return {"path": str(path.relative_to(REPO)), **scored(pairs, judged, threshold, "kind")}


def built(spec: str, device: str | None) -> tuple[TextVerifier, float]:
    """The verifier `spec` names and its threshold, as the service builds them."""
    from mmrag.core.components import build_attributor
    from mmrag.core.settings import Settings
    from mmrag.indexes.errors import InputError

    try:
        attributor = build_attributor(Settings.load(verifier=spec, device=device))
    except InputError as exc:
        raise SystemExit(f"--verifier {spec}: {exc}") from None
    return attributor.verifier, attributor.threshold


def imported(target: str) -> TextVerifier:
    """`module:callable` called with no arguments."""
    module, _, name = target.partition(":")
    try:
        factory: Callable[[], TextVerifier] = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise SystemExit(f"--factory {target}: cannot import it ({exc})") from None
    return factory()


def main() -> None:
    from mmrag.generation.verification.verifier import SUPPORTED

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--verifier", default="lexical", help="lexical or nli:NAME (a service spec)"
    )
    parser.add_argument("--factory", help="module:callable building another verifier instead")
    parser.add_argument("--name", help="the report's name (default: from the verifier)")
    parser.add_argument("--threshold", type=float, help=f"support cut (default: {SUPPORTED})")
    parser.add_argument("--device", help="cpu, cuda (for a model verifier)")
    parser.add_argument("--dev", type=Path, default=DEV, help="AttributionBench dev.jsonl")
    parser.add_argument(
        "--held-out-only",
        action="store_true",
        help="judge only the dev split's held-out part (what a fitted verifier is reported on)",
    )
    parser.add_argument("--out", type=Path, help="default: docs/bench/attribution-dev-NAME.json")
    args = parser.parse_args()

    if args.factory:
        verifier, threshold = imported(args.factory), SUPPORTED
    else:
        verifier, threshold = built(args.verifier, args.device)
    threshold = threshold if args.threshold is None else args.threshold
    name = args.name or re.sub(r"[^A-Za-z0-9.]+", "-", args.factory or args.verifier).strip("-")
    out = args.out or REPO / "docs" / "bench" / f"attribution-dev-{name}.json"

    started = time.perf_counter()  # the first call loads the verifier's models
    verifier.support("Is the bench ready?", "The bench is ready.", ["Bench. The bench is ready."])
    results = {
        "command": " ".join(sys.argv),
        "machine": machine(),
        "verifier": args.factory or args.verifier,
        "threshold": threshold,
        "first_call_s": round(time.perf_counter() - started, 2),
    }
    if args.dev.is_file():
        results["attributionbench_dev"] = score_dev(
            verifier, threshold, args.dev, args.held_out_only
        )
    else:
        print(f"skipping AttributionBench: {args.dev} is not there", file=sys.stderr)
        results["attributionbench_dev"] = {"skipped": f"{args.dev} is not there"}
    results["verifier_heldout"] = score_pairs(verifier, threshold, HELD_OUT)
    results["invented_test"] = score_pairs(verifier, threshold, INVENTED_TEST)
    write_report(results, out)


if __name__ == "__main__":
    main()
