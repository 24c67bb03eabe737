"""Declines and latency of cited answers: the sample's answerable and unanswerable questions.

Every sample question the corpus answers (all splits), then every question of
data/sample/unanswerable.json (which no source answers), through `QAPipeline.answer` with the
service's defaults (decline when no source supports, citations checked). Reports, per set, how
answers were attributed (model / verified / extractive / declined), the decline rate, the
share of kept answers stating a number or name no source holds, and answer latency; for the
answerable set also WebQA's keyword accuracy and how often a gold fact is cited (a decline
scores 0 on both), so the verifier is not judged by its own verdicts alone; without
constrained decoding (the default) and with it (`--guided-citations`; `--no-guided` skips that
run).

    .venv/bin/python -m bench.attribution --index var/sample-index --out docs/bench/attribution.json
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from collections import Counter
from pathlib import Path
from typing import NamedTuple

from bench.report import latency_percentiles, write_report
from mmrag.core.components import build_pipeline
from mmrag.core.settings import Settings
from mmrag.evaluation.metrics.webqa_acc import keyword_accuracy
from mmrag.generation.verification.attribution import invented_terms
from mmrag.indexes.corpus.webqa import iter_questions

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "sample"


class Asked(NamedTuple):
    """A question, and for an answerable one what WebQA grades it by."""

    question: str
    keywords: str | None = None
    qcate: str = ""
    gold: frozenset[str] = frozenset()


def measure(pipeline, questions: list[Asked]) -> dict:
    origins: Counter[str] = Counter()
    invented, seconds, accuracy, gold_cited = 0, [], [], []
    for asked in questions:
        started = time.perf_counter()
        answer = pipeline.answer(asked.question).answer
        seconds.append(time.perf_counter() - started)
        origins[answer.attribution or "error"] += 1
        cited = [answer.sources[c.marker - 1] for c in answer.citations]
        if not answer.abstained:
            invented += bool(invented_terms(asked.question, answer.text_without_markers, cited))
        if asked.gold:  # a decline scores 0 on both
            said = "" if answer.abstained else answer.text_without_markers
            accuracy.append(keyword_accuracy(said, asked.keywords, asked.qcate) if said else 0.0)
            gold_cited.append(bool({source.id for source in cited} & asked.gold))
    kept = len(questions) - origins["declined"]
    graded = {
        "webqa_accuracy": round(sum(accuracy) / max(len(accuracy), 1), 4),
        "gold_fact_cited": round(sum(gold_cited) / max(len(gold_cited), 1), 4),
    }
    return {
        "questions": len(questions),
        **(graded if accuracy else {}),
        "attribution": dict(sorted(origins.items())),
        "decline_rate": round(origins["declined"] / len(questions), 4),
        "invented_rate_of_kept": round(invented / kept, 4) if kept else None,
        **latency_percentiles(seconds, (50, 90), prefix="answer_"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, required=True, help="the sample index")
    parser.add_argument("--out", type=Path, help="also write the JSON report here")
    parser.add_argument("--no-guided", action="store_true", help="skip the guided comparison")
    args = parser.parse_args()
    answerable = [
        Asked(q.question, q.keywords, q.qcate, frozenset(q.gold_source_ids))
        for q in iter_questions(SAMPLE / "WebQA_sample.json")
    ]
    unanswerable = [
        Asked(entry["question"])
        for entry in json.loads((SAMPLE / "unanswerable.json").read_text())["questions"]
    ]
    results: dict = {"machine": f"{platform.machine()}, {platform.processor() or 'cpu'}"}
    for guided in (False,) if args.no_guided else (False, True):
        pipeline = build_pipeline(Settings(index=args.index, guided_citations=guided))
        results["guided" if guided else "unguided"] = {
            "answerable": measure(pipeline, answerable),
            "unanswerable": measure(pipeline, unanswerable),
        }
    write_report(results, args.out)


if __name__ == "__main__":
    main()
