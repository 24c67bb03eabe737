"""`mmrag eval score BENCH`: score a prediction file against a benchmark's gold file.

(`mmrag eval run BENCH`, which produces prediction files and scores them through the same
`evaluation.scoring` modules, is registered here and lives in `evaluation.runs`.)

Prints one JSON object on stdout (the benchmark's official figures); notes about how they were
got (questions without predictions, without keywords...) go to stderr as warnings. Heavy
imports (spaCy, torch, transformers) happen inside the run function, so `mmrag --help` stays
instant.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from mmrag.evaluation.runs import driver
from mmrag.evaluation.runs.aokvqa import AOKVQARun
from mmrag.evaluation.runs.stvqa import STVQARun
from mmrag.evaluation.runs.toloka import TolokaRun
from mmrag.evaluation.runs.vlqa import VLQARun
from mmrag.evaluation.runs.webqa import WebQARun

BENCHMARKS = ("webqa", "aokvqa", "stvqa", "toloka", "vlqa")


def register(commands: argparse._SubParsersAction) -> None:
    evaluate = commands.add_parser("eval", help="score predictions on benchmarks")
    actions = evaluate.add_subparsers(dest="action", metavar="ACTION", required=True)

    score = actions.add_parser(
        "score",
        help="score a prediction file against a gold file",
        description="Score predictions with the benchmark's official metric; prints one JSON "
        "object.",
    )
    score.add_argument("bench", metavar="BENCH", choices=BENCHMARKS, help=" | ".join(BENCHMARKS))
    score.add_argument("--gold", type=Path, help="the benchmark's gold (release) file")
    score.add_argument("--pred", type=Path, help="predictions in the benchmark's official format")
    webqa = score.add_argument_group("webqa")
    webqa.add_argument(
        "--baseline-tsv",
        type=Path,
        help="WebQA baseline-release TSV (gold columns + Output); replaces --gold/--pred",
    )
    webqa.add_argument("--split", help="score only gold questions of this split (e.g. val)")
    webqa.add_argument("--no-fl", action="store_true", help="skip fluency (fl, fl_x_acc null)")
    webqa.add_argument(
        "--fl-model",
        default="facebook/bart-large-cnn",
        help="BART model for fluency: hub name or local directory (default %(default)s)",
    )
    webqa.add_argument("--fl-batch-size", type=int, default=16, help="default %(default)s")
    webqa.add_argument(
        "--no-attribution",
        action="store_true",
        help="skip citation recall/precision and the decline rate",
    )
    webqa.add_argument(
        "--verifier",
        default="lexical",
        help="judge of whether a cited source supports an answer: lexical (offline, loads "
        "MiniLM) or nli:NAME_OR_PATH (default %(default)s)",
    )
    webqa.add_argument(
        "--index",
        type=Path,
        help="read cited sources from this index (default: the gold file's facts)",
    )
    score.set_defaults(run=run_score)

    run = actions.add_parser(
        "run",
        help="run mmrag over a benchmark, write official predictions, score and report",
        description="Answer a benchmark's questions with mmrag, write the official submission "
        "file (atomically; resumable from OUT.partial.jsonl), score it and write OUT.report.md "
        "with charts beside it. Everything that can be refused is checked before any model "
        "loads.",
    )
    benches = run.add_subparsers(dest="bench", metavar="BENCH", required=True)
    for bench in (WebQARun, AOKVQARun, STVQARun, TolokaRun, VLQARun):
        driver.add_parser(benches, bench)


def _inputs(args: argparse.Namespace) -> None:
    from mmrag.evaluation.errors import EvaluationError

    if args.baseline_tsv is not None:
        if args.bench != "webqa":
            raise EvaluationError("--baseline-tsv is only for webqa")
        if args.gold is not None or args.pred is not None:
            raise EvaluationError("give either --baseline-tsv or --gold and --pred, not both")
        return
    if args.gold is None or args.pred is None:
        raise EvaluationError(f"eval score {args.bench} needs --gold FILE and --pred FILE")
    if args.bench != "webqa" and args.split is not None:
        raise EvaluationError("--split is only for webqa")


def _score_webqa(args: argparse.Namespace) -> Any:
    from mmrag.evaluation.loaders import webqa as loader
    from mmrag.evaluation.scoring import webqa

    if args.baseline_tsv is not None:
        questions, predictions = loader.load_baseline_tsv(args.baseline_tsv)
        pred_label = str(args.baseline_tsv)
    else:
        questions = loader.load_gold(args.gold, split=args.split)
        predictions = loader.load_predictions(args.pred)
        pred_label = str(args.pred)
    fl = None
    if not args.no_fl:
        from mmrag.evaluation.metrics.fluency import BartLogLikelihood

        fl = BartLogLikelihood(args.fl_model, batch_size=args.fl_batch_size)
    attribution = None
    if not args.no_attribution and args.baseline_tsv is None:
        attribution = webqa.AttributionCheck(
            build_attributor_for(args.verifier), source_lookup(args)
        )
    return webqa.score(
        questions, predictions, fl=fl, attribution=attribution, pred_label=pred_label
    )


def build_attributor_for(verifier: str):
    from mmrag.core.components import build_attributor
    from mmrag.core.settings import Settings

    return build_attributor(Settings.load(None, verifier=verifier))


def source_lookup(args: argparse.Namespace):
    """Cited sources by id: from `--index`, else the facts of the gold file's questions."""
    if args.index is not None:
        from mmrag.indexes.collection import Collection

        return Collection(args.index).store.find
    from mmrag.evaluation.loaders import webqa as loader

    facts = {
        source.id: source
        for question in loader.load_gold(args.gold, with_negatives=True)
        for source in (*question.pos_sources, *question.neg_sources)
    }
    return facts.get


def _score_other(args: argparse.Namespace) -> Any:
    import importlib

    loader = importlib.import_module(f"mmrag.evaluation.loaders.{args.bench}")
    scoring = importlib.import_module(f"mmrag.evaluation.scoring.{args.bench}")
    gold = loader.load_gold(args.gold)
    predictions = loader.load_predictions(args.pred)
    if args.bench == "toloka":
        return scoring.score(gold, predictions, pred_label=str(args.pred))
    return scoring.score(gold, predictions, gold_label=str(args.gold), pred_label=str(args.pred))


def run_score(args: argparse.Namespace) -> int:
    _inputs(args)
    report = _score_webqa(args) if args.bench == "webqa" else _score_other(args)
    for warning in report.warnings:
        print(f"mmrag: warning: {warning}", file=sys.stderr)
    print(json.dumps(report.metrics, indent=2))
    return 0
