"""Fit the default verifier's support probability (`verification.verifier.LexicalVerifier`).

    python -m bench.fit_verifier --out docs/bench/fit-verifier.json

The probability is a logistic model over `verifier.FEATURES` (what grounding leaves unsaid, by
kind of word; the shares of the claim said; its MiniLM similarity to the evidence; its length),
fitted on two kinds of labelled claims, each counted with equal weight:

- AttributionBench's development split, its fit part only (`bench.attribution_dev.fit_part`):
  long-form claims by real LLMs over real web pages, judged by people;
- `bench/data/invented_fit.jsonl`: one-sentence answers in the embedded model's style, right or
  with one invented word, number, name or clause.

A claim the verifier finds contradicted (its hard rules) is refused whatever its score, so it
takes no part in the fit. The regularisation is chosen by five folds, the threshold by the mean
macro-F1 of the two sets (contradicted claims counted as refused); each weight is reported with
what leaving its feature out costs. The held-out sets (AttributionBench's held-out part, the 332
pairs, `invented_test.jsonl`) are never read here: `bench.attribution_dev` reports them.
Features are cached by content in `var/fit-verifier-features.json`, so a refit is fast.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.attribution_dev import fit_part  # noqa: E402
from bench.report import machine, write_report  # noqa: E402
from bench.verifier_accuracy import load_pairs  # noqa: E402
from mmrag.core.components import minilm_embed  # noqa: E402
from mmrag.generation.reading.question import read_question  # noqa: E402
from mmrag.generation.reading.text import read  # noqa: E402
from mmrag.generation.verification import verifier as verifiers  # noqa: E402
from mmrag.indexes.atomic import atomic_write_text  # noqa: E402

INVENTED_FIT = REPO / "bench" / "data" / "invented_fit.jsonl"
WEIGHTS = REPO / "generation" / "verification" / "weights.json"
CACHE = REPO / "var" / "fit-verifier-features.json"
SETTLED = 0.9  # the precision from which a text score is `certain`


def labelled() -> dict[str, list[tuple[str, str, list[str], bool]]]:
    """(question, claim, evidence, supported) of each fitting set."""
    sets = {"attributionbench_fit": [], "invented_fit": []}
    for row in fit_part():
        sets["attributionbench_fit"].append(
            (row["question"], row["claim"], row["references"], row["supported"])
        )
    for row in load_pairs(INVENTED_FIT):
        sets["invented_fit"].append(
            (row["question"], row["claim"], [row["evidence"]], row["supported"])
        )
    return sets


def described(verifier, question: str, claim: str, evidence: list[str]) -> dict:
    """A claim's features and contradictions, as the verifier computes them."""
    asked = read_question(question)
    narrowed = [verifiers.nearest(claim, text) for text in evidence]
    parts = verifiers.clauses(claim)
    rows = []
    for part in parts if len(parts) > 1 else [claim]:
        judged = verifier._judged(asked, part, narrowed)
        rows.append(
            {
                "features": verifier.features(asked, read(part), narrowed, judged.ungrounded),
                "contradicted": bool(judged.contradictions),
                "reasons": list(judged.contradictions),
            }
        )
    return {"clauses": rows}


def key(question: str, claim: str, evidence: list[str]) -> str:
    return hashlib.sha256(json.dumps([question, claim, evidence]).encode()).hexdigest()[:20]


def claim_probability(described: dict, weights: np.ndarray) -> float:
    """The claim's probability: its weakest clause's; 0 where one is contradicted."""
    scores = []
    for clause in described["clauses"]:
        if clause["contradicted"]:
            return 0.0
        z = float(np.dot(weights, clause["features"]))
        scores.append(1 / (1 + np.exp(-z)))
    return min(scores)


def settled_from(scored: list[list[tuple[float, bool]]], precision: float = SETTLED) -> float:
    """The lowest score from which the claims of every set are supported at least `precision`
    of the time (else the grid's top, 0.95): where the text settles a claim, so no judge need
    look at its image."""
    for cut in np.arange(0.5, 0.96, 0.05):
        shares = [[label for p, label in rows if p >= cut] for rows in scored]
        if all(kept and np.mean(kept) >= precision for kept in shares):
            return round(float(cut), 2)
    return 0.95


def macro_f1(truth: list[bool], said: list[bool]) -> float:
    from sklearn.metrics import f1_score

    return float(f1_score(truth, said, average="macro"))


def main() -> None:
    from sklearn.linear_model import LogisticRegression

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--dry-run", action="store_true", help="report, do not write weights")
    args = parser.parse_args()
    verifier = verifiers.LexicalVerifier(minilm_embed())
    cache = json.loads(CACHE.read_text()) if CACHE.exists() else {}
    sets = labelled()
    data: dict[str, list[tuple[dict, bool]]] = {}
    for name, rows in sets.items():
        data[name] = []
        for question, claim, evidence, supported in rows:
            found = key(question, claim, evidence)
            if found not in cache:
                cache[found] = described(verifier, question, claim, evidence)
            data[name].append((cache[found], supported))
        CACHE.parent.mkdir(exist_ok=True)
        atomic_write_text(CACHE, json.dumps(cache))
    # Each clause carries its claim's label; each set weighs as much as the other.
    x, y, w = [], [], []
    for rows in data.values():
        clauses = [(c, label) for d, label in rows for c in d["clauses"] if not c["contradicted"]]
        for clause, label in clauses:
            x.append(clause["features"][1:])
            y.append(label)
            w.append(1.0 / len(clauses))
    x, y, w = np.array(x), np.array(y), np.array(w) * len(y) / 2

    def fitted(columns: list[int], c: float) -> np.ndarray:
        model = LogisticRegression(C=c, max_iter=5000)
        model.fit(x[:, columns], y, sample_weight=w)
        full = np.zeros(len(verifiers.FEATURES))
        full[0] = model.intercept_[0]
        full[[i + 1 for i in columns]] = model.coef_[0]
        return full

    def quality(weights: np.ndarray) -> tuple[float, float]:
        """The best mean macro-F1 of the two sets over thresholds, and that threshold."""
        best = (0.0, 0.5)
        for threshold in np.arange(0.2, 0.81, 0.02):
            f1 = np.mean(
                [
                    macro_f1(
                        [label for _, label in rows],
                        [claim_probability(d, weights) >= threshold for d, _ in rows],
                    )
                    for rows in data.values()
                ]
            )
            best = max(best, (float(f1), round(float(threshold), 2)))
        return best

    every = list(range(len(verifiers.FEATURES) - 1))
    by_c = {c: quality(fitted(every, c))[0] for c in (0.1, 0.3, 1.0, 3.0)}
    c = max(by_c, key=lambda k: (by_c[k], -k))
    weights = fitted(every, c)
    f1, threshold = quality(weights)
    without = {
        verifiers.FEATURES[i + 1]: round(
            f1 - quality(fitted([j for j in every if j != i], c))[0], 4
        )
        for i in every
    }
    shares = {
        name: {
            "macro_f1": round(
                macro_f1(
                    [label for _, label in rows],
                    [claim_probability(d, weights) >= threshold for d, _ in rows],
                ),
                3,
            ),
            "judged_supported": round(
                float(np.mean([claim_probability(d, weights) >= threshold for d, _ in rows])), 3
            ),
            "contradicted": sum(any(cl["contradicted"] for cl in d["clauses"]) for d, _ in rows),
        }
        for name, rows in data.items()
    }
    # The chosen threshold folded into the bias: a verdict is supported from 0.5, as every
    # verifier's is (`verifier.SUPPORTED`).
    shifted = weights.copy()
    shifted[0] -= np.log(threshold / (1 - threshold))
    certain = settled_from(
        [[(claim_probability(d, shifted), label) for d, label in rows] for rows in data.values()]
    )
    found = {
        "features": list(verifiers.FEATURES),
        "weights": [round(float(v), 4) for v in shifted],
        "threshold": 0.5,
        "threshold_chosen": threshold,
        "certain": certain,
        "fitted_on": "AttributionBench dev fit part + invented_fit.jsonl: python -m "
        "bench.fit_verifier",
    }
    if not args.dry_run:
        stored = json.loads(WEIGHTS.read_text())
        stored["verifier"] = found
        atomic_write_text(WEIGHTS, json.dumps(stored, indent=2) + "\n")
    refused: dict[str, list[bool]] = {}  # each hard rule: the labels of the claims it refused
    for rows in data.values():
        for described_claim, label in rows:
            reasons = {r for c in described_claim["clauses"] for r in c.get("reasons", [])}
            for reason in {re.sub(r"'[^']*'", "…", r) for r in reasons}:
                refused.setdefault(reason, []).append(label)
    write_report(
        {
            "hard_rules": {
                reason: {
                    "refused": len(labels),
                    "precision": round(1 - sum(labels) / len(labels), 3),
                }
                for reason, labels in sorted(refused.items())
            },
            "command": " ".join(sys.argv),
            "machine": machine(),
            "c_by_mean_macro_f1": by_c,
            "c": c,
            "fitted": found,
            "weights": dict(zip(verifiers.FEATURES, found["weights"], strict=True)),
            "mean_macro_f1_on_the_fit_sets": round(f1, 3),
            "macro_f1_lost_without_each_feature": without,
            "fit_sets": shares,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
