"""Checks the hand-written right-versus-invented sets before anything is fitted or scored on them.

    python -m bench.pairs_check

`bench/data/invented_fit.jsonl` (for fitting) and `bench/data/invented_test.jsonl` (reported
only) must each have every field, balanced labels, both labels in every topic and no pair
twice; and, so that a verifier fitted on one is honestly scored on the other, they share no
pair, no topic and no invented name, and neither borrows a name from the earlier held-out set
(`bench/data/verifier_heldout.jsonl`) or from `data/sample`. A name here is a capitalised word
(not the first of a sentence, not a month, weekday or title word such as
`Mount`) whose lower-case form occurs nowhere in
the texts compared. Exits 1 naming each problem.
"""

from __future__ import annotations

import calendar
import re
import sys
from collections import Counter
from itertools import combinations
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.verifier_accuracy import load_pairs  # noqa: E402

DATA = REPO / "bench" / "data"
FIT = DATA / "invented_fit.jsonl"
TEST = DATA / "invented_test.jsonl"
EARLIER = {"verifier_heldout": DATA / "verifier_heldout.jsonl"}
SAMPLE = REPO / "data" / "sample" / "WebQA_sample.json"

FIELDS = {
    "topic": str,
    "kind": str,
    "question": str,
    "claim": str,
    "evidence": str,
    "supported": bool,
}
CALENDAR = {name for name in [*calendar.month_name, *calendar.day_name] if name}
CALENDAR |= {f"{day}s" for day in calendar.day_name}
# English words that begin place and title names ("Mount Dallig", "St Ebrin's"): not names here
TITLE_WORDS = {"Dr", "Little", "Meadow", "Mount", "Point", "Saint", "St"}
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")
CAPITALISED = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][A-Za-z'-]+\b")
LOWER = re.compile(r"\b[a-z][a-z'-]*\b")


def texts(pairs: list[dict]) -> list[str]:
    return [pair[field] for pair in pairs for field in ("question", "claim", "evidence")]


def form_problems(name: str, pairs: list[dict]) -> list[str]:
    """Missing or mistyped fields, evidence not "Title. 1-4 sentences", repeats, imbalance."""
    problems = []
    for line, pair in enumerate(pairs, 1):
        for field, kind in FIELDS.items():
            if not isinstance(pair.get(field), kind) or pair.get(field) == "":
                problems.append(f"{name}:{line}: field {field!r} missing or not {kind.__name__}")
        evidence = pair.get("evidence", "")
        if isinstance(evidence, str) and not 2 <= len(SENTENCE.split(evidence)) <= 5:
            problems.append(f"{name}:{line}: evidence is not 'Title. Text' of 1-4 sentences")
    repeats = Counter((p.get("question"), p.get("claim"), p.get("evidence")) for p in pairs)
    problems += [f"{name}: pair twice: {key[1]!r}" for key, n in repeats.items() if n > 1]
    labels = Counter(bool(pair.get("supported")) for pair in pairs)
    if labels[True] != labels[False]:
        problems.append(f"{name}: {labels[True]} supported vs {labels[False]} unsupported")
    by_topic: dict[str, set[bool]] = {}
    for pair in pairs:
        by_topic.setdefault(pair.get("topic", ""), set()).add(bool(pair.get("supported")))
    problems += [
        f"{name}: topic {t!r} has one label only" for t, s in by_topic.items() if len(s) < 2
    ]
    return problems


def names(text: list[str], lower: set[str]) -> set[str]:
    found = set()
    for sentence in (s for t in text for s in SENTENCE.split(t)):
        found |= {w for w in CAPITALISED.findall(sentence) if w.lower() not in lower}
    return found - CALENDAR - TITLE_WORDS


def overlap_problems(sets: dict[str, list[dict]], others: dict[str, list[str]]) -> list[str]:
    """Pairs, topics and names shared by the two sets, or borrowed from earlier texts."""
    every = {name: texts(pairs) for name, pairs in sets.items()} | others
    lower = {w for text in every.values() for t in text for w in LOWER.findall(t)}
    named = {name: names(text, lower) for name, text in every.items()}
    problems = []
    (a, pairs_a), (b, pairs_b) = sets.items()
    shared = {(p["question"], p["claim"]) for p in pairs_a} & {
        (p["question"], p["claim"]) for p in pairs_b
    }
    problems += [f"{a} and {b} share the pair {claim!r}" for _, claim in sorted(shared)]
    topics = {p["topic"].lower() for p in pairs_a} & {p["topic"].lower() for p in pairs_b}
    problems += [f"{a} and {b} share the topic {t!r}" for t in sorted(topics)]
    for one, two in combinations(named, 2):
        if one in sets or two in sets:
            common = sorted(named[one] & named[two])
            problems += [f"{one} and {two} share the name {w!r}" for w in common]
    return problems


def main() -> None:
    sets = {path.stem: load_pairs(path) for path in (FIT, TEST)}
    others = {name: texts(load_pairs(path)) for name, path in EARLIER.items()}
    others["data/sample"] = [SAMPLE.read_text()]
    problems = [p for name, pairs in sets.items() for p in form_problems(name, pairs)]
    problems += overlap_problems(sets, others)
    for name, pairs in sets.items():
        labels = Counter(pair["supported"] for pair in pairs)
        kinds = len({pair["kind"] for pair in pairs})
        topics = len({pair["topic"] for pair in pairs})
        print(
            f"{name}: {len(pairs)} pairs, {labels[True]} supported / {labels[False]} not, "
            f"{topics} topics, {kinds} kinds"
        )
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        raise SystemExit(1)
    print("ok: fields, balance, no repeats, no shared pair, topic or name")


if __name__ == "__main__":
    main()
