"""`mmrag eval run webqa|aokvqa`: answer a benchmark's questions, write the official prediction
file, score it with the code `mmrag eval score` uses, and write a report beside it.

Everything that can be refused (options, data files, a partial file of another run, a missing
image) is checked before any model loads, so a mistake costs seconds, not a model load.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mmrag.core.options import (
    add_config_option,
    add_generation_options,
    add_pipeline_options,
    add_retrieval_options,
)


def register(actions: argparse._SubParsersAction) -> None:
    run = actions.add_parser(
        "run",
        help="run mmrag over a benchmark, write official predictions, score and report",
        description="Answer a benchmark's questions with mmrag, write the official submission "
        "file (atomically; resumable from OUT.partial.jsonl), score it and write OUT.report.md "
        "with charts beside it.",
    )
    benches = run.add_subparsers(dest="bench", metavar="BENCH", required=True)
    _webqa_parser(benches)
    _aokvqa_parser(benches)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="prediction file to write")
    parser.add_argument("--limit", type=int, help="only the first N questions of the split")
    parser.add_argument(
        "--resume", action="store_true", help="continue from OUT.partial.jsonl of the same run"
    )


def _webqa_parser(benches: argparse._SubParsersAction) -> None:
    webqa = benches.add_parser(
        "webqa",
        help="WebQA: retrieve, select sources, answer; retrieval F1, FL, Acc",
        description="Writes {guid: {sources: [...], answer: ...}} (the WebQA submission format).",
    )
    webqa.add_argument(
        "--data", type=Path, action="append", required=True, help="WebQA_*.json (repeatable)"
    )
    webqa.add_argument("--index", type=Path, required=True, help="index built from those files")
    webqa.add_argument(
        "--setting",
        choices=["full", "restricted"],
        default="full",
        help="full: retrieve from the whole index; restricted: rank the question's own "
        "positive and negative facts (default full)",
    )
    webqa.add_argument("--split", default="val", help="questions of this split (default val)")
    webqa.add_argument(
        "--images", type=Path, help="imgs.tsv (checked; the index reads its own image store)"
    )
    _common(webqa)
    webqa.add_argument("--k", type=int, help="full setting: candidates retrieved (--rerank-k)")
    webqa.add_argument(
        "--fl-model", help="BART for fluency (hub name or directory); without it FL is null"
    )
    webqa.add_argument("--fl-batch-size", type=int, default=16, help="default %(default)s")
    add_pipeline_options(webqa)
    webqa.set_defaults(run=run_webqa)


def _aokvqa_parser(benches: argparse._SubParsersAction) -> None:
    aokvqa = benches.add_parser(
        "aokvqa",
        help="A-OKVQA: rationale, direct answer, multiple choice; MC, DA, BLEU, METEOR",
        description="Writes {question_id: {multiple_choice, direct_answer, rationale}}.",
    )
    aokvqa.add_argument("--data", type=Path, required=True, help="aokvqa_v1p0_{split}.json")
    aokvqa.add_argument("--coco-dir", type=Path, required=True, help="holds {split}2017/*.jpg")
    aokvqa.add_argument("--split", help="COCO split (default: from the file name, else val)")
    _common(aokvqa)
    aokvqa.add_argument(
        "--skip-missing", action="store_true", help="skip questions whose image is missing"
    )
    aokvqa.add_argument(
        "--captions", type=Path, help="JSON {image_id: caption} for engines without vision"
    )
    aokvqa.add_argument("--index", type=Path, help="retrieve knowledge from this index")
    aokvqa.add_argument("--knowledge", type=int, default=2, help="sources from --index")
    aokvqa.add_argument("--choose", choices=["similarity", "likelihood"], default="similarity")
    add_config_option(aokvqa)
    add_retrieval_options(aokvqa)
    add_generation_options(aokvqa)
    aokvqa.set_defaults(run=run_aokvqa)


def run_webqa(args: argparse.Namespace) -> int:
    from mmrag.evaluation.runs.webqa_command import run

    return run(args)


def run_aokvqa(args: argparse.Namespace) -> int:
    from mmrag.evaluation.runs.aokvqa_command import run

    return run(args)
