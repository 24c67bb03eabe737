"""`mmrag retrieval calibrate`: fit per (retriever, modality) score calibration for an index."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mmrag.core.options import setting_flag


def register(commands: argparse._SubParsersAction) -> None:
    retrieval = commands.add_parser("retrieval", help="tune retrieval for an index")
    actions = retrieval.add_subparsers(dest="action", metavar="ACTION", required=True)
    calibrate = actions.add_parser(
        "calibrate", help="fit score calibration on held-out WebQA questions"
    )
    calibrate.add_argument("--index", type=Path, required=True)
    calibrate.add_argument(
        "--questions",
        type=Path,
        required=True,
        action="append",
        help="WebQA JSON with gold facts (repeatable)",
    )
    calibrate.add_argument(
        "--split",
        default="train",
        help="only questions of this split (default train; 'all' for every)",
    )
    calibrate.add_argument("--depth", type=int, default=20, help="list depth per retriever")
    calibrate.add_argument(
        "--max-sources",
        type=int,
        default=2,
        help="sources an answer keeps, for fitting the selection threshold",
    )
    # Calibration fits every list of the chosen retrievers; fusion is what it makes possible.
    setting_flag(calibrate, "retrievers")
    setting_flag(calibrate, "device")
    calibrate.set_defaults(run=run_calibrate)


def run_calibrate(args: argparse.Namespace) -> int:
    from mmrag.evaluation.metrics.retrieval import source_f1
    from mmrag.indexes.collection import Collection
    from mmrag.indexes.corpus.webqa import iter_questions
    from mmrag.indexes.manifest import discard_unverified_calibration, record_calibration
    from mmrag.retrieval.hybrid import HybridRetriever, fit_calibration

    discarded = discard_unverified_calibration(args.index)
    if discarded:
        print(f"mmrag: discarded the old calibration: {discarded}", file=sys.stderr)
    retriever = HybridRetriever(Collection(args.index), args.retrievers, "rrf", device=args.device)
    questions = (
        (question.question, question.gold_source_ids)
        for path in args.questions
        for question in iter_questions(path)
        if args.split == "all" or question.split == args.split
    )
    calibration = fit_calibration(
        retriever, questions, source_f1, depth=args.depth, max_sources=args.max_sources
    )
    path = calibration.save(args.index)
    record_calibration(args.index)
    curves = ", ".join(
        f"{key} a={a:.3g} b={b:.3g}" for key, (a, b) in sorted(calibration.curves.items())
    )
    print(
        f"calibrated {len(calibration.curves)} lists on {calibration.questions} questions "
        f"into {path}: {curves}; selection threshold {calibration.threshold:g}"
    )
    return 0
