"""What answers one Toloka VQA question: its box, in the CSV's pixel frame, or why it has
none. This process, or each Ray worker, builds one with `build_runner`.

When its image decodes but the grounder gives no usable box (a reply with no box, a box
outside the image), the box is the whole image: its IoU is the gold box's share of the image,
where an empty box would score 0. When there are no pixels (an image that will not decode, a
failed generator) there is no box, written as the empty box 0,0,0,0, which scores IoU 0 as a
missing answer would. Boxes are submitted as the integers that contain them.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mmrag.evaluation.loaders.toloka import TolokaItem
from mmrag.generation.errors import GenerationError
from mmrag.indexes.errors import InputError
from mmrag.indexes.images import decode_image

if TYPE_CHECKING:  # models load only when a run starts; `mmrag --help` stays instant
    from mmrag.core.settings import Settings
    from mmrag.generation.grounding import Grounder

Record = dict[str, Any]
EMPTY_BOX = (0, 0, 0, 0)
# Why a question has no box of its own (the whole image for NO_BOX, else the empty box).
MISSING, UNDECODABLE, FAILED, NO_BOX = (
    "image missing",
    "image does not decode",
    "generator failed",
    "no box found",
)


def image_file(item: TolokaItem, images: Path) -> Path:
    """`--images DIR/<file name of the image URL>`; a bare file name works too."""
    return images / PurePosixPath(urlsplit(item.image).path).name


def empty(reason: str, error: str, started: float | None = None) -> Record:
    """No box, and why; timed from `started` when a runner tried."""
    timings = {} if started is None else {"timings": {"total_s": time.perf_counter() - started}}
    return {"box": None, "reason": reason, "error": error, **timings}


@dataclass
class TolokaRunner:
    """One question's box, in the CSV's pixel frame; what the checkpoint stores."""

    grounder: Grounder
    images: Path

    def __call__(self, item: TolokaItem) -> Record:
        started = time.perf_counter()
        path = image_file(item, self.images)
        try:
            data = path.read_bytes()
            width, height = decode_image(data).size
        except FileNotFoundError:
            return empty(MISSING, f"{path}: no such image", started)
        except InputError as exc:
            return empty(UNDECODABLE, f"{path}: {exc}", started)
        try:
            found = self.grounder.locate(data, item.question)
        except GenerationError as exc:
            return empty(FAILED, str(exc), started)
        timings = {**found.timings, "total_s": time.perf_counter() - started}
        record: Record = {"query": found.query, "timings": timings}
        # Gold boxes are in the CSV's width x height; an image stored at another size is mapped.
        frame_width, frame_height = item.width or width, item.height or height
        if found.region is None:
            whole = [0.0, 0.0, float(frame_width), float(frame_height)]
            return {**record, "box": whole, "reason": NO_BOX, "error": found.error}
        region = found.region
        sx = frame_width / width
        sy = frame_height / height
        box = [region.left * sx, region.top * sy, region.right * sx, region.bottom * sy]
        return {**record, "box": box, "score": region.score, "rescaled": (sx, sy) != (1, 1)}


def build_runner(settings: Settings, *, images: Path) -> TolokaRunner:
    """A runner with its own grounder: what this process, or each Ray worker, builds."""
    from mmrag.core.components import build_engine, build_grounder

    return TolokaRunner(build_grounder(settings, build_engine(settings)), images)


def submission_box(record: Record) -> tuple[int, int, int, int]:
    """Whole pixels containing the found box (floor, floor, ceil, ceil); the empty box else."""
    box = record.get("box")
    if box is None:
        return EMPTY_BOX
    left, top, right, bottom = box
    return math.floor(left), math.floor(top), math.ceil(right), math.ceil(bottom)
