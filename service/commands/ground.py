"""`mmrag ground`: the box of the object that answers a question about an image."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mmrag.core.options import (
    add_config_option,
    add_generation_options,
    add_grounding_options,
    setting_flag,
    settings_from,
)


def register(commands: argparse._SubParsersAction) -> None:
    ground = commands.add_parser(
        "ground", help="draw one box around what answers a question about an image"
    )
    ground.add_argument("--image", type=Path, required=True, help="image file (JPEG/PNG)")
    ground.add_argument("--question", required=True)
    add_config_option(ground)
    add_generation_options(ground)
    add_grounding_options(ground)
    setting_flag(ground, "device")
    ground.add_argument("--json", action="store_true", help="print the result as JSON")
    ground.set_defaults(run=run_ground)


def run_ground(args: argparse.Namespace) -> int:
    """Exit 0 with a box; 1 (one line on stderr) without, the JSON still printed with --json."""
    from mmrag.core.components import build_engine, build_grounder, grounding_problem
    from mmrag.indexes.errors import InputError
    from mmrag.indexes.images import decode_image, read_image_file
    from mmrag.service.schemas import GroundResponse

    settings = settings_from(args)
    data = read_image_file(args.image, settings.max_body_bytes)
    pixels = decode_image(data)  # refuse a file that is not an image before any model loads
    if (problem := grounding_problem(settings)) is not None:
        raise InputError(problem)
    grounder = build_grounder(settings, build_engine(settings))
    found = grounder.locate(data, args.question)
    result = GroundResponse.from_grounding(found, grounder.strategy, pixels.size)
    if args.json:
        print(json.dumps(result.model_dump(), indent=2, ensure_ascii=False))
    elif result.box is not None:
        box = result.box
        score = "" if box.score is None else f", score {box.score:.3f}"
        print(
            f"box: left {box.left:.1f}, top {box.top:.1f}, right {box.right:.1f}, bottom "
            f"{box.bottom:.1f} in {result.width}x{result.height} pixels ({result.query!r}{score})"
        )
    if result.box is None:
        print(f"mmrag: error: no box: {result.error}", file=sys.stderr)
        return 1
    return 0
