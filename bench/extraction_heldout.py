"""Extractive answers on text written elsewhere: does the source's own sentence answer?

    python -m bench.extraction_heldout --out docs/bench/extraction-heldout.json

The choice of a source's statement as the answer (`selection.choose`, its weights fitted by
`bench.fit_selection` on development questions) never saw these questions. This measures them on
`bench/data/verifier_heldout.jsonl`, whose questions and evidence were written outside it: for
each question with a supported claim, its evidence ("Title. Text") is the one source, and

- answered: a sentence of it is extracted;
- right: the extracted sentence holds every fact the supported claim adds to the question (its
  numbers, names and attributes);
- other subject: for questions asked of a thing the evidence is not about (kind
  "other-subject", no supported claim), extracting nothing is right.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import machine, write_report  # noqa: E402
from mmrag.generation.reading.question import read_question  # noqa: E402
from mmrag.generation.reading.text import read, terms  # noqa: E402
from mmrag.generation.verification.selection import choose  # noqa: E402
from tests.helpers import Src  # noqa: E402

HELD_OUT = REPO / "bench" / "data" / "verifier_heldout.jsonl"


def source(evidence: str) -> Src:
    title, _, text = evidence.partition(". ")
    text = text or title
    return Src("held-out", "text" if read(text).finite() else "image", title, text)


def facts(question: str, claim: str) -> frozenset[str]:
    """What a supported claim adds to its question: its numbers, names and attributes."""
    said, asked = terms(claim), terms(question)
    return (said.numbers | said.names | said.attributes) - asked.words


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=Path, default=HELD_OUT)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = [json.loads(line) for line in args.pairs.read_text().splitlines() if line.strip()]
    supported: dict[tuple[str, str], str] = {}
    other: set[tuple[str, str]] = set()
    for row in rows:
        key = (row["question"], row["evidence"])
        if row["supported"]:
            supported.setdefault(key, row["claim"])
        elif row["kind"] == "other-subject":
            other.add(key)
    other -= set(supported)
    answers = []
    for (question, evidence), claim in sorted(supported.items()):
        found = choose(read_question(question), [source(evidence)])
        said = found.said if found else None
        wanted = facts(question, claim)
        right = said is not None and wanted <= terms(said).words
        answers.append({"question": question, "answer": said, "right": right})
    declined = [
        choose(read_question(question), [source(evidence)]) is None for question, evidence in other
    ]
    answered = [a for a in answers if a["answer"] is not None]
    right = [a for a in answers if a["right"]]
    results = {
        "command": " ".join(sys.argv),
        "machine": machine(),
        "summary": {
            "questions_with_a_supported_claim": len(answers),
            "answered": round(len(answered) / len(answers), 3),
            "answered_with_the_claims_facts": round(
                sum(a["right"] for a in answers) / len(answers), 3
            ),
            "other_subject_questions": len(declined),
            "other_subject_declined": round(sum(declined) / len(declined), 3) if declined else None,
        },
        "unanswered_or_wrong": [a for a in answers if not a["right"]],
    }
    write_report(results, args.out)


if __name__ == "__main__":
    main()
