"""`mmrag rationale`: A-OKVQA mode, a short rationale and then the answer it supports."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mmrag.core.options import add_generation_options, settings_from


def register(commands: argparse._SubParsersAction) -> None:
    rationale = commands.add_parser(
        "rationale", help="A-OKVQA style: rationale, direct answer, multiple-choice answer"
    )
    rationale.add_argument("--image", type=Path, required=True, help="image file (JPEG/PNG)")
    rationale.add_argument("--question", required=True)
    rationale.add_argument("--choices", nargs="+", help="the multiple-choice options")
    rationale.add_argument(
        "--caption", help="what the image shows, for engines that cannot see images"
    )
    rationale.add_argument(
        "--choose",
        choices=["similarity", "likelihood"],
        default="similarity",
        help="MC answer: choice nearest the direct answer, or most likely",
    )
    rationale.add_argument("--index", type=Path, help="retrieve knowledge from this index")
    rationale.add_argument("--knowledge", type=int, default=2, help="sources from --index")
    add_generation_options(rationale)
    rationale.add_argument("--json", action="store_true")
    rationale.set_defaults(run=run_rationale)


def run_rationale(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from mmrag.core.components import build_engine, build_rationale_writer, build_retriever
    from mmrag.generation.rationale import choices_problem
    from mmrag.indexes.errors import InputError
    from mmrag.indexes.images import decode_image, read_image_file

    if (problem := choices_problem(args.choices)) is not None:
        raise InputError(f"--choices: {problem}")
    settings = settings_from(args)
    image = read_image_file(args.image, settings.max_body_bytes)
    decode_image(image)  # refuse a file that is not an image before any model loads
    knowledge = []
    if args.index:
        settings = settings.model_copy(update={"index": args.index})
        candidates = build_retriever(settings).search(args.question, args.knowledge)
        knowledge = [candidate.source for candidate in candidates]
    writer = build_rationale_writer(build_engine(settings), args.choose)
    result = writer.answer(
        args.question, image=image, caption=args.caption, choices=args.choices, knowledge=knowledge
    )
    if args.json:
        print(json.dumps(asdict(result), indent=2, ensure_ascii=False))
        return 0
    print(f"rationale: {result.rationale}")
    print(f"direct answer: {result.direct_answer}")
    if result.multiple_choice is not None:
        print(f"multiple choice: {result.multiple_choice}")
    return 0
