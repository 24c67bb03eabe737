"""spaCy's parse in place of the lexical verifier's hand-written attribute rule: cost and accuracy.

    python -m bench.spacy_rules --out docs/bench/spacy-rules.json

The verifier reads which noun a colour or material is said of with a hand-written rule
(`attributes.bound_attributes`: adjectives before a noun, a linking verb after its phrase, over
the words of the text's `Reading`). The same reading holds spaCy's dependency parse: an
adjective is said of its head noun (`amod`), or of a copula's subject (`acomp`, `attr`,
`oprd`). This swaps the parse in for the rule and scores the held-out claims of
`bench.verifier_accuracy` both ways, and times what the reading costs a process that answers:
spaCy's import and model load with torch kept out (cold start of `mmrag ask`) and its parse per
evidence sentence.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import write_report  # noqa: E402
from bench.verifier_accuracy import HELD_OUT, load_pairs, score, verifiers  # noqa: E402
from mmrag.generation.reading import text as reading  # noqa: E402

LOAD = (
    "import sys, time; t = time.perf_counter(); "
    "from mmrag.generation.reading.text import warm_up; warm_up(); "
    "print(time.perf_counter() - t, 'torch' in sys.modules)"
)
# An attribute a verb links to a noun: "is blue", "painted blue" (which the small parser also
# reads as the verb's object).
_SAID_OF_SUBJECT = frozenset({"acomp", "attr", "oprd", "xcomp", "ccomp", "dobj"})


def cold_load() -> tuple[float, bool]:
    """Seconds to import spaCy and load the model in a fresh process; whether torch came too."""
    out = subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True, check=True)
    seconds, torch = out.stdout.split()
    return float(seconds), torch == "True"


def said_of(sentence: str) -> dict[int, reading.Word | None]:
    """Each attribute word of a sentence and the noun the parse says it of (None: none): an
    adjective's head noun, a linking verb's object or subject, a list's first member's noun."""
    read = reading.read(sentence)
    words, found = read.words, {}
    for word in words:
        if word.attribute is None or word.negated:
            continue
        at = word
        while at.dep == "conj" and at.head != at.i:
            at = words[at.head]
        head = words[at.head] if at.head != at.i else None
        if head is not None and at.dep in _SAID_OF_SUBJECT:
            subjects = [c for c in read.children(head.i) if c.dep in reading.SUBJECTS]
            objects = [c for c in read.children(head.i) if c.dep == "dobj" and c is not at]
            head = (objects or subjects or [None])[0]
        while head is not None and head.pos not in ("NOUN", "PROPN") and head.head != head.i:
            head = words[head.head]
        found[word.i] = head if head is not None and head.pos in ("NOUN", "PROPN") else None
    return found


def _of_kind(sentence: str, kind: str, keep) -> frozenset[str]:
    words = reading.read(sentence).words
    return frozenset(
        words[at].attribute
        for at, noun in said_of(sentence).items()
        if reading.ATTRIBUTE_KIND[words[at].attribute] == kind and keep(noun)
    )


def parsed_binding(sentence: str, nouns: frozenset[str], kind: str) -> frozenset[str]:
    """`bound_attributes` read from spaCy's parse instead of the rule."""
    return _of_kind(
        sentence, kind, lambda noun: noun is not None and reading.STEM(noun.text.lower()) in nouns
    )


def parsed_of_subject(sentence: str, subject: frozenset[str], kind: str) -> frozenset[str]:
    """`attributes_of_subject` read from spaCy's parse instead of the rule."""
    return _of_kind(
        sentence, kind, lambda noun: noun is None or reading.STEM(noun.text.lower()) in subject
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    pairs = load_pairs(HELD_OUT)
    seconds, torch = cold_load()
    texts = [pair["evidence"] for pair in pairs]
    started = time.perf_counter()
    parsed = reading.read_all(texts)
    sentences = sum(len(text.sentences) for text in parsed)
    per_sentence = (time.perf_counter() - started) / sentences
    verifier = verifiers(["lexical"])["lexical"]
    rule = score(verifier, pairs)
    with (
        mock.patch("mmrag.generation.verification.questions.bound_attributes", parsed_binding),
        mock.patch(
            "mmrag.generation.verification.questions.attributes_of_subject", parsed_of_subject
        ),
        mock.patch(
            "mmrag.generation.verification.verifier.attributes_of_subject", parsed_of_subject
        ),
    ):
        spacy_scored = score(verifier, pairs)
    results = {
        "command": " ".join(sys.argv),
        "spacy_import_and_load_s": round(seconds, 2),
        "spacy_imports_torch": torch,
        "parse_ms_per_sentence": round(1000 * per_sentence, 2),
        "held_out_accuracy": {"rule": rule["accuracy"], "spacy_parse": spacy_scored["accuracy"]},
        "per_kind": {
            kind: {"rule": rule["per_kind"][kind], "spacy_parse": spacy_scored["per_kind"][kind]}
            for kind in rule["per_kind"]
        },
    }
    write_report(results, args.out)


if __name__ == "__main__":
    main()
