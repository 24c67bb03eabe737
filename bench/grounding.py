"""Open questions, as people explore: do the cited answers say only what their sources say?

    python -m bench.grounding --index var/sample-index --out docs/bench/grounding.json

`bench/data/grounding_questions.json` holds open-ended questions over the sample corpus written
for this ("Tell me about …", "Describe …", "What is special about …", "Why …"), not derived from
the sample's questions, some of which the corpus cannot answer. Each is asked once through
`QAPipeline.answer` with the service's defaults, and the answer is judged by a fixed rule that
does not change with the verifier:

- invented: a cited answer holding a content word (noun, name, verb, adjective, adverb,
  number; the framing "the photo shows" aside) whose lemma, stem or number none of its cited
  sources holds;
- answered: an answerable question answered with a citation (and, as a finer figure, one that
  cites a source holding its facts, or states one of them);
- declined: an unanswerable question answered with the decline;
- sentence: the answer is one sentence with a finite verb.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import machine, write_report  # noqa: E402
from mmrag.core.components import build_pipeline  # noqa: E402
from mmrag.core.settings import Settings  # noqa: E402
from mmrag.generation.reading.text import STEM, UNITS, read  # noqa: E402
from mmrag.generation.verification.statements import evidence_text  # noqa: E402

QUESTIONS = REPO / "bench" / "data" / "grounding_questions.json"


def _held(texts: list[str]) -> set[str]:
    """Every lemma, stem, lower-case word, unit and number the texts hold."""
    held = set()
    for text in texts:
        for word in read(text).words:
            held |= {word.lemma, STEM(word.lemma), word.text.lower()}
            held |= {UNITS[word.lemma]} if word.lemma in UNITS else set()
            held |= {word.number} if word.number else set()
    return held


def invented_words(answer: str, cited: list[str]) -> list[str]:
    """The answer's content words that no cited source holds, by lemma, stem or number."""
    held = _held(cited)
    said = read(answer)
    found = []
    for word in said.words:
        if not word.content:
            continue
        forms = {word.number} if word.number else {word.lemma, STEM(word.lemma), word.text.lower()}
        forms |= {UNITS[word.lemma]} if word.lemma in UNITS else set()
        if not forms & held:
            found.append(word.text)
    return found


def judge(item: dict, result) -> dict:
    answer = result.answer
    plain = answer.text_without_markers
    cited = [answer.sources[c.marker - 1] for c in answer.citations]
    invented = invented_words(plain, [evidence_text(s) for s in cited]) if cited else []
    facts = [fact.lower() for fact in item["facts"]]
    return {
        "id": item["id"],
        "question": item["question"],
        "answerable": item["answerable"],
        "answer": answer.text,
        "attribution": answer.attribution,
        "cut": [cut.text for cut in answer.cut],
        "cited": bool(cited),
        "cited_ids": [source.id for source in cited],
        "declined": answer.abstained,
        "invented": invented,
        "cites_a_source_of_its_facts": bool({s.id for s in cited} & set(item["sources"])),
        "states_a_fact": any(fact in plain.lower() for fact in facts),
        "sentence": read(plain).finite(),
    }


def share(rows: list[dict], key: str) -> float:
    return round(sum(bool(row[key]) for row in rows) / len(rows), 3) if rows else float("nan")


def summary(rows: list[dict], seconds: list[float]) -> dict:
    cited = [row for row in rows if row["cited"]]
    answerable = [row for row in rows if row["answerable"]]
    unanswerable = [row for row in rows if not row["answerable"]]
    answered = [row for row in answerable if row["cited"] and not row["declined"]]
    return {
        "questions": len(rows),
        "cited_answers": len(cited),
        "cited_with_an_invented_word": share(cited, "invented"),
        "answerable": len(answerable),
        "answerable_answered_and_cited": share(answerable, "cited"),
        "answered_citing_a_source_of_its_facts": share(answered, "cites_a_source_of_its_facts"),
        "answered_stating_a_fact": share(answered, "states_a_fact"),
        "unanswerable": len(unanswerable),
        "unanswerable_declined": share(unanswerable, "declined"),
        "full_sentences": share(rows, "sentence"),
        "answer_p50_s": round(statistics.median(seconds), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, default=REPO / "var" / "sample-index")
    parser.add_argument("--questions", type=Path, default=QUESTIONS)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    pipeline = build_pipeline(Settings.load(None, index=args.index))
    items = json.loads(args.questions.read_text())["questions"]
    rows, seconds = [], []
    for item in items:
        started = time.perf_counter()
        result = pipeline.answer(item["question"], timeout_s=120)
        seconds.append(time.perf_counter() - started)
        rows.append(judge(item, result))
    results = {
        "command": " ".join(sys.argv),
        "machine": machine(),
        "summary": summary(rows, seconds),
        "answers": rows,
    }
    write_report(results, args.out)


if __name__ == "__main__":
    main()
