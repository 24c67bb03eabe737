"""`mmrag ask`: retrieve, select and answer one question with cited sources."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, get_args

from mmrag.core.options import add_pipeline_options, settings_from
from mmrag.retrieval.types import ModalityFilter

if TYPE_CHECKING:  # the schemas import pydantic models of the pipeline: loaded when run
    from mmrag.service.schemas import AnswerResponse


def register(commands: argparse._SubParsersAction) -> None:
    ask = commands.add_parser("ask", help="answer a question in one sentence that cites sources")
    ask.add_argument("question")
    ask.add_argument("--index", type=Path, required=True)
    ask.add_argument("--k", type=int, help="candidates retrieved (default: --rerank-k)")
    ask.add_argument("--modality", choices=get_args(ModalityFilter), default="all")
    ask.add_argument(
        "--image",
        type=Path,
        help="a photo of your own to ask about: source [1], read by OCR (and seen by engines "
        "that take images); retrieved sources follow",
    )
    add_pipeline_options(ask)
    ask.add_argument("--stream", action="store_true", help="print the answer as it is written")
    ask.add_argument("--json", action="store_true", help="print the answer as JSON")
    ask.set_defaults(run=run_ask)


def run_ask(args: argparse.Namespace) -> int:
    from mmrag.core.components import build_attacher, build_pipeline
    from mmrag.indexes.errors import InputError
    from mmrag.indexes.images import read_image_file
    from mmrag.service.schemas import AnswerResponse

    settings = settings_from(args)
    image = None
    if args.image is not None:
        data = read_image_file(args.image, settings.max_body_bytes)
        try:
            image = build_attacher(settings).attach(data)
        except InputError as exc:
            raise InputError(f"--image {args.image}: {exc}") from None
    pipeline = build_pipeline(settings)
    streamed: list[str] = []
    with pipeline.run(args.question, k=args.k, modality=args.modality, image=image) as run:
        if args.stream and not args.json:
            for token in run:
                streamed.append(token)
                print(token, end="", flush=True)
            print()
        result = run.wait()
    response = AnswerResponse.from_result(result)
    if args.json:
        print(json.dumps(response.model_dump(), indent=2, ensure_ascii=False))
        return 0 if response.generation_error is None else 1
    return print_answer(response, "".join(streamed) if args.stream else None)


def print_answer(response: AnswerResponse, streamed: str | None = None) -> int:
    """The checked answer (after the model's own words, when they were streamed and the check
    changed them), its sources with their markers, and the generator's failure if it failed:
    then 1."""
    if streamed is None or " ".join(streamed.split()) != " ".join(response.answer.split()):
        label = "" if streamed is None else "checked: "
        print(f"{label}{response.answer}" if response.answer else "(no answer)")
    for source in response.sources:
        marker = next(
            (c.marker for c in response.citations if c.source_id == source.source_id), None
        )
        label = f"[{marker}]" if marker else "   "
        print(f"  {label} {source.title} ({source.modality} {source.source_id})")
    if response.generation_error:
        print(f"mmrag: error: no answer written: {response.generation_error}", file=sys.stderr)
        return 1
    return 0
