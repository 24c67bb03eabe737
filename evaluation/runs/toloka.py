"""`mmrag eval run toloka`: Toloka VQA (WSDM Cup 2023) grounding, scored and reported.

Each question's image is found in `--images` by the file name of its URL (nothing is
downloaded), grounded by the configured strategy (`generation.grounding`: the generator names
the answer and `--detector` boxes it, or `--grounder vlm`), and its box, in the pixels of the
CSV's width and height, goes into the competition's submission CSV
(`image,left,top,right,bottom`, the columns the starter kit's reproduction writes).

Every question gets a row. When its image decodes but the grounder gives no usable box (a
reply with no box, a box outside the image), the row is the whole image: its IoU is the gold
box's share of the image, where an empty box would score 0. When there are no pixels (its image
missing under `--skip-missing`, an image that will not decode, a failed generator) the row is
the empty box 0,0,0,0, which scores IoU 0 as a missing answer would. The report counts each
kind. Boxes are written as integers that contain the found box (left and top rounded
down, right and bottom up), inside the image.

Steps, each refusable input checked before models load: the questions (`--limit`), their
images, the grounding configuration, the partial file (`--resume`); the grounder; the question
loop; the submission written atomically, read back and scored as `eval score toloka` would when
the CSV has gold boxes; the report (`OUT.report.md`, `OUT.iou.png`) with the paper's private-test
table beside ours.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from mmrag.core.options import (
    add_config_option,
    add_generation_options,
    add_grounding_options,
    settings_from,
)
from mmrag.evaluation.errors import EvaluationError
from mmrag.evaluation.loaders import toloka as loader
from mmrag.evaluation.loaders.toloka import BOX_COLUMNS, TolokaItem
from mmrag.evaluation.runs.checkpoint import (
    Answering,
    Checkpoint,
    add_run_options,
    check_run_options,
    print_warnings,
    sibling,
)
from mmrag.evaluation.runs.report import (
    TOLOKA,
    Bar,
    Reference,
    bar_chart,
    number,
    table,
    timing_table,
)
from mmrag.evaluation.scoring import toloka as scoring
from mmrag.generation.errors import GenerationError
from mmrag.indexes.atomic import atomic_write_text
from mmrag.indexes.errors import InputError
from mmrag.indexes.images import decode_image

if TYPE_CHECKING:  # models load only when a run starts; `mmrag --help` stays instant
    from mmrag.core.settings import Settings
    from mmrag.generation.grounding import Grounder

EMPTY_BOX = (0, 0, 0, 0)
# Why a question has no box of its own (the whole image for NO_BOX, else the empty box).
MISSING, UNDECODABLE, FAILED, NO_BOX = (
    "image missing",
    "image does not decode",
    "generator failed",
    "no box found",
)
GROUNDING_FIELDS = ("grounder", "detector", "engine", "model", "engine_url", "vision")


def image_file(item: TolokaItem, images: Path) -> Path:
    """`--images DIR/<file name of the image URL>`; a bare file name works too."""
    return images / PurePosixPath(urlsplit(item.image).path).name


def _empty(reason: str, error: str, started: float) -> dict[str, Any]:
    return {
        "box": None,
        "reason": reason,
        "error": error,
        "timings": {"total_s": time.perf_counter() - started},
    }


class TolokaRunner:
    """One question's box, in the CSV's pixel frame; what the checkpoint stores."""

    def __init__(self, grounder: Grounder, images: Path) -> None:
        self.grounder = grounder
        self.images = images

    def __call__(self, item: TolokaItem) -> dict[str, Any]:
        started = time.perf_counter()
        path = image_file(item, self.images)
        try:
            data = path.read_bytes()
            width, height = decode_image(data).size
        except FileNotFoundError:
            return _empty(MISSING, f"{path}: no such image", started)
        except InputError as exc:
            return _empty(UNDECODABLE, f"{path}: {exc}", started)
        try:
            found = self.grounder.locate(data, item.question)
        except GenerationError as exc:
            return _empty(FAILED, str(exc), started)
        timings = {**found.timings, "total_s": time.perf_counter() - started}
        record: dict[str, Any] = {"query": found.query, "timings": timings}
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


def submission_box(record: dict[str, Any]) -> tuple[int, int, int, int]:
    """Whole pixels containing the found box (floor, floor, ceil, ceil); the empty box else."""
    box = record.get("box")
    if box is None:
        return EMPTY_BOX
    left, top, right, bottom = box
    return math.floor(left), math.floor(top), math.ceil(right), math.ceil(bottom)


def submission(items: Sequence[TolokaItem], records: dict[str, dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["image", *BOX_COLUMNS])
    for item in items:
        writer.writerow([item.image, *submission_box(records[item.image])])
    return buffer.getvalue()


@dataclass
class TolokaRunInfo:
    out: Path
    run: dict[str, Any]
    items: list[TolokaItem]
    records: dict[str, dict[str, Any]]
    ran_now: int
    resumed: int
    seconds: float
    answered_by: str = "this process"


def _strategy(run: dict[str, Any]) -> str:
    engine = f"{run['engine']} ({run.get('model') or 'embedded model'})"
    if run["grounder"] == "vlm":
        return f"a grounding VLM writes the box: {engine}, bbox_2d JSON"
    return f"{engine} names the object, detector `{run['detector']}` boxes it (best box)"


def _run_table(info: TolokaRunInfo) -> str:
    rows = [
        ("data", info.run["data"]),
        ("images", info.run["images"]),
        ("grounding", _strategy(info.run)),
        (
            "questions",
            f"{len(info.items)} ({info.ran_now} answered in this run, {info.resumed} resumed)",
        ),
        ("wall time", f"{info.seconds:.1f} s (this process, models loading included)"),
        ("answered by", info.answered_by),
    ]
    return table(["", ""], rows)


def _scores(info: TolokaRunInfo, metrics: dict[str, float] | None) -> str:
    if metrics is None:
        return (
            f"Not scored: `{Path(info.run['data']).name}` has no gold boxes; submit the "
            "prediction file, or score it later with `mmrag eval score toloka`."
        )
    ours = [
        "mmrag (this run)",
        number(metrics["iou"], 3),
        number(metrics["iou_gt_50"], 3),
        number(metrics["iou_gt_70"], 3),
    ]
    published = [[b.system, number(b.value, 3), "-", "-"] for b in TOLOKA]
    return (
        "Mean IoU x100 and the shares of questions with IoU above 0.5 and 0.7, computed from the "
        "submission as written (`evaluation.scoring.toloka`, the code `mmrag eval score toloka` "
        "uses); empty boxes score 0, whole-image boxes the gold box's share of the image. "
        "Published figures: the Toloka VQA paper's private test "
        "(4,504 questions).\n\n"
        + table(["system", "IoU", "IoU > 0.5", "IoU > 0.7"], [ours, *published])
    )


def _counts(info: TolokaRunInfo) -> str:
    records = [info.records[item.image] for item in info.items]
    reasons = Counter(record["reason"] for record in records if record.get("reason"))
    rows = [
        ("questions with a box", len(records) - sum(reasons.values())),
        *((f"{_fallback(reason)}: {reason}", count) for reason, count in sorted(reasons.items())),
        ("boxes mapped to the CSV's width x height", sum(bool(r.get("rescaled")) for r in records)),
    ]
    if info.run["grounder"] == "detector":
        asked = sum(info.records[i.image].get("query") == i.question for i in info.items)
        rows.append(("detector queried with the question (the generator named nothing)", asked))
    return table(["", "count"], rows)


def _fallback(reason: str) -> str:
    return "whole image" if reason == NO_BOX else "empty box"


def _failures(info: TolokaRunInfo, limit: int = 10) -> str:
    failed = [
        (item.image, info.records[item.image])
        for item in info.items
        if info.records[item.image].get("reason")
    ]
    rows = [[image, record.get("reason"), record.get("error") or ""] for image, record in failed]
    more = f"\n\n... and {len(rows) - limit} more" if len(rows) > limit else ""
    return table(["image", "why", "detail"], rows[:limit]) + more


def _queries(info: TolokaRunInfo, limit: int = 10) -> str:
    named = Counter(
        info.records[item.image].get("query")
        for item in info.items
        if info.records[item.image].get("query")
    )
    return table(["looked for", "questions"], named.most_common(limit))


def write_chart(info: TolokaRunInfo, metrics: dict[str, float]) -> Path:
    path = sibling(info.out, ".iou.png")
    bars = [
        Bar("mean IoU", metrics["iou"]),
        Bar("IoU > 0.5 (%)", 100 * metrics["iou_gt_50"]),
        Bar("IoU > 0.7 (%)", 100 * metrics["iou_gt_70"]),
    ]
    references = [
        Reference(b.value, f"published mean IoU: {b.label}", "published", (0, 0)) for b in TOLOKA
    ]
    bar_chart(
        path,
        bars,
        title=f"Toloka VQA: mmrag on {len(info.items)} questions\n"
        "published (dashed, over mean IoU) are on the private test: orientation only",
        ylabel="IoU x100 / % of questions",
        references=references,
    )
    return path


def _comparability(info: TolokaRunInfo) -> str:
    return (
        "> **Not comparable with the published numbers** unless this run covers the whole "
        f"private test (4,504 questions): it answered {len(info.items)} questions of "
        f"`{Path(info.run['data']).name}`. The paper's table is shown for orientation."
    )


def write_toloka_report(
    info: TolokaRunInfo, metrics: dict[str, float] | None, warnings: list[str]
) -> Path:
    sections = [
        "# mmrag eval run toloka",
        _comparability(info),
        "## Run",
        _run_table(info),
        "## Scores",
        _scores(info, metrics),
        "## Counts",
        _counts(info),
        "## Most frequent queries",
        _queries(info),
        "## Mean time per question",
        timing_table([info.records[item.image].get("timings") or {} for item in info.items]),
    ]
    if metrics is not None:
        chart = write_chart(info, metrics)
        sections += ["## Chart", f"![IoU beside the published table]({chart.name})"]
    if any(info.records[item.image].get("reason") for item in info.items):
        sections += ["## Questions without a box of their own", _failures(info)]
    if warnings:
        sections += ["## Scoring notes", "\n".join(f"- {w}" for w in warnings)]
    report = sibling(info.out, ".report.md")
    atomic_write_text(report, "\n\n".join(sections) + "\n")
    return report


def add_parser(benches: argparse._SubParsersAction) -> None:
    toloka = benches.add_parser(
        "toloka",
        help="Toloka VQA (WSDM Cup 2023): one box per question; IoU, IoU>0.5, IoU>0.7",
        description="Writes the competition's submission CSV (image,left,top,right,bottom).",
    )
    toloka.add_argument(
        "--data", type=Path, required=True, help="release CSV (train, test_public, test_private)"
    )
    toloka.add_argument(
        "--images", type=Path, required=True, help="folder of the images, by URL file name"
    )
    add_run_options(toloka)
    toloka.add_argument(
        "--skip-missing",
        action="store_true",
        help="give questions whose image is missing the empty box instead of stopping",
    )
    add_config_option(toloka)
    add_generation_options(toloka)
    add_grounding_options(toloka)
    toloka.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from mmrag.core.components import grounding_problem

    started = time.perf_counter()
    check_run_options(args)
    items = loader.load_questions(args.data)[: args.limit]
    if not args.images.is_dir():
        raise EvaluationError(f"--images {args.images}: no such folder")
    missing = [path for item in items if not (path := image_file(item, args.images)).is_file()]
    if missing and not args.skip_missing:
        raise EvaluationError(
            f"{missing[0]}: no such image ({len(missing)} of {len(items)} images missing); "
            "check --images, or pass --skip-missing to give them the empty box"
        )
    settings = settings_from(args)
    if (problem := grounding_problem(settings)) is not None:
        raise EvaluationError(problem)
    description = {
        "bench": "toloka",
        "data": str(args.data.resolve()),
        "images": str(args.images.resolve()),
        **settings.model_dump(mode="json", include=set(GROUNDING_FIELDS)),
    }
    checkpoint = Checkpoint.open(args.out, description, resume=args.resume)
    with Answering(args, settings, partial(build_runner, images=args.images)) as answering:
        ran = answering.run(items, lambda item: item.image, checkpoint, desc="toloka")
    checkpoint.finish(args.out, submission(items, checkpoint.records))

    metrics, warnings = None, []
    if all(item.box is not None for item in items):
        gold = {item.image: item for item in items}
        report = scoring.score(gold, loader.load_predictions(args.out), pred_label=str(args.out))
        metrics, warnings = report.metrics, report.warnings
    print_warnings(warnings)
    info = TolokaRunInfo(
        out=args.out,
        run=checkpoint.run,
        items=items,
        records=checkpoint.records,
        ran_now=ran,
        resumed=len(items) - ran,
        seconds=time.perf_counter() - started,
        answered_by=answering.describe(),
    )
    report_path = write_toloka_report(info, metrics, warnings)
    records = [checkpoint.records[item.image] for item in items]
    empty = sum(record.get("box") is None for record in records)
    whole = sum(record.get("reason") == NO_BOX for record in records)
    scored = (
        "not scored (no gold boxes)"
        if metrics is None
        else f"IoU {number(metrics['iou'], 3)}, IoU>0.5 {number(metrics['iou_gt_50'], 3)}, "
        f"IoU>0.7 {number(metrics['iou_gt_70'], 3)}"
    )
    print(
        f"toloka: {len(items)} questions ({ran} answered, {info.resumed} resumed, {empty} empty "
        f"boxes, {whole} whole images) in {info.seconds:.1f} s; {scored}; wrote {args.out}, "
        f"{report_path}"
    )
    return 0
