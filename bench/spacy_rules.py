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
from mmrag.generation.verification import reading  # noqa: E402

LOAD = (
    "import sys, time; t = time.perf_counter(); "
    "from mmrag.generation.verification.reading import warm_up; warm_up(); "
    "print(time.perf_counter() - t, 'torch' in sys.modules)"
)
_SAID_OF_SUBJECT = frozenset({"acomp", "attr", "oprd"})


def cold_load() -> tuple[float, bool]:
    """Seconds to import spaCy and load the model in a fresh process; whether torch came too."""
    out = subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True, check=True)
    seconds, torch = out.stdout.split()
    return float(seconds), torch == "True"


def parsed_binding(sentence: str, nouns: frozenset[str], kind: str) -> frozenset[str]:
    """`bound_attributes` read from spaCy's parse instead of the rule."""
    read = reading.read(sentence)
    found = set()
    for word in read.words:
        if word.attribute is None or reading.ATTRIBUTE_KIND[word.attribute] != kind:
            continue
        head = read.words[word.head]
        if word.dep in _SAID_OF_SUBJECT:  # "the door is blue": the copula's subject
            subjects = [c for c in read.children(head.i) if c.dep.startswith("nsubj")]
            head = subjects[0] if subjects else head
        if reading.STEM(head.text.lower()) in nouns:
            found.add(word.attribute)
    return frozenset(found)


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
    with mock.patch(
        "mmrag.generation.verification.questions.bound_attributes", parsed_binding
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
