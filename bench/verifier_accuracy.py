"""How often the text verifier is right, on claims written apart from the sample corpus.

    python -m bench.verifier_accuracy --out docs/bench/verifier-heldout.json

The lexical verifier's rules were tuned on `data/sample`, so its figures there flatter it. The
held-out set (`bench/data/verifier_heldout.jsonl`, written for this benchmark: other places,
other objects, other phrasings) pairs a question, a one-sentence claim and one source's text,
labelled supported or not, in kinds that stress each rule: numbers, names, colours, shapes,
materials, yes/no verdicts, negation, paraphrase, word forms (lemmas), invented facts and
facts about another subject. Each verifier named is scored as `Attributor.judgement` uses it,
at the attributor's threshold: accuracy overall and per kind, precision and recall of
"supported", and every pair it gets wrong.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import write_report  # noqa: E402
from mmrag.generation.verification.verifier import SUPPORTED, LexicalVerifier  # noqa: E402

HELD_OUT = REPO / "bench" / "data" / "verifier_heldout.jsonl"


def load_pairs(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def verifiers(names: list[str]) -> dict[str, LexicalVerifier]:
    built = {}
    for name in names:
        if name == "lexical":
            from mmrag.core.components import minilm_embed

            built[name] = LexicalVerifier(minilm_embed())
        elif name == "lexical-no-embed":
            built[name] = LexicalVerifier()
        else:
            raise SystemExit(f"unknown verifier {name!r}")
    return built


def score(verifier: LexicalVerifier, pairs: list[dict]) -> dict:
    by_kind: dict[str, list[bool]] = defaultdict(list)
    wrong, predicted = [], []
    started = time.perf_counter()
    for pair in pairs:
        support = verifier.support(pair["question"], pair["claim"], [pair["evidence"]])
        said = support >= SUPPORTED
        predicted.append(said)
        by_kind[pair["kind"]].append(said == pair["supported"])
        if said != pair["supported"]:
            wrong.append({**pair, "score": round(support, 3)})
    seconds = time.perf_counter() - started
    truth = [pair["supported"] for pair in pairs]
    hits = sum(p and t for p, t in zip(predicted, truth, strict=True))
    right = sum(p == t for p, t in zip(predicted, truth, strict=True))
    return {
        "accuracy": round(right / len(pairs), 3),
        "precision": round(hits / max(1, sum(predicted)), 3),
        "recall": round(hits / max(1, sum(truth)), 3),
        "per_kind": {
            kind: {"n": len(right), "accuracy": round(sum(right) / len(right), 3)}
            for kind, right in sorted(by_kind.items())
        },
        "ms_per_pair": round(1000 * seconds / len(pairs), 2),
        "wrong": wrong,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=Path, default=HELD_OUT)
    parser.add_argument("--verifiers", nargs="+", default=["lexical", "lexical-no-embed"])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    pairs = load_pairs(args.pairs)
    results = {
        "command": " ".join(sys.argv),
        "pairs": str(args.pairs.relative_to(REPO)) if args.pairs.is_relative_to(REPO) else "",
        "n": len(pairs),
        "supported": sum(pair["supported"] for pair in pairs),
        "threshold": SUPPORTED,
        "verifiers": {name: score(v, pairs) for name, v in verifiers(args.verifiers).items()},
    }
    write_report(results, args.out)


if __name__ == "__main__":
    main()
