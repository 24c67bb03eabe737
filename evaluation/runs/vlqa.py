"""`mmrag eval run vlqa`: VLQA (image + passage multiple choice) through the A-OKVQA mode.

Each item is answered by the rationale writer (`generation.rationale`) with its passage as the
one knowledge source, and its image as the image for engines that see images, or, for text-only
engines, what `--captions` says of it and, with `--ocr`, the text PP-OCR reads in it (VLQA's
images are often charts and diagrams whose words carry the answer). The
choice is the option nearest the direct answer (`--choose similarity`) or the likeliest option
letter (`likelihood`), as in `mmrag rationale`. An item whose image lists several sub-images is
shown them side by side, as the release's composite images are.

The prediction file is the official one the VLQA site's `static/evaluate.py` reads,
`{"val": [answer index per item, in gold order]}` (`--split` names the key), or
`{question_id: index}` with `--format by-id`; every item gets an index (the first option when
the chooser had no preference, counted in the report). An image that is missing is an error
before models load (or, with `--skip-missing`, answered from text alone); one that does not
decode is answered from text alone and counted.
"""

from __future__ import annotations

import argparse
import io
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from mmrag.core.options import (
    add_config_option,
    add_generation_options,
    setting_flag,
    settings_from,
)
from mmrag.evaluation.errors import DatasetError, EvaluationError
from mmrag.evaluation.io import read_json
from mmrag.evaluation.loaders import vlqa as loader
from mmrag.evaluation.loaders.vlqa import VLQAItem
from mmrag.evaluation.runs.checkpoint import (
    Answering,
    Checkpoint,
    add_run_options,
    check_file,
    check_run_options,
    print_warnings,
    sibling,
)
from mmrag.evaluation.runs.report import (
    VLQA,
    Bar,
    Reference,
    bar_chart,
    number,
    table,
    timing_table,
)
from mmrag.evaluation.scoring import vlqa as scoring
from mmrag.generation.rationale import CHOOSERS
from mmrag.indexes.atomic import atomic_write_text
from mmrag.indexes.errors import InputError
from mmrag.indexes.images import decode_image

if TYPE_CHECKING:  # models load only when a run starts; `mmrag --help` stays instant
    from mmrag.core.attachments import ImageAttacher
    from mmrag.core.settings import Settings
    from mmrag.generation.rationale import RationaleWriter

FORMATS = ("official", "by-id")


@dataclass(frozen=True)
class Passage:
    """An item's passage as the one knowledge source the rationale prompt shows."""

    text: str
    id: str = "passage"
    modality: str = "text"
    title: str = "Passage"


def image_names(item: VLQAItem) -> list[str]:
    return [item.image] if isinstance(item.image, str) else [str(name) for name in item.image]


def image_path(name: str, images: Path) -> Path:
    """The image under `--images` by its relative path, else by its file name."""
    relative = images / name
    return relative if relative.is_file() else images / PurePosixPath(name).name


def missing_images(items: Sequence[VLQAItem], images: Path) -> list[Path]:
    return [
        path
        for item in items
        for name in image_names(item)
        if name and not (path := image_path(name, images)).is_file()
    ]


def load_texts(path: Path | None) -> dict[str, str]:
    """`{image file name: text}`: what a text-only engine is told about each image."""
    if path is None:
        return {}
    data = read_json(path)
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise DatasetError(f"{path}: expected a JSON object {{image file name: text}}")
    return {PurePosixPath(name).name: text for name, text in data.items()}


def side_by_side(images: Sequence[bytes]) -> bytes:
    """One PNG of several images in a row, tops aligned: how the release composes sub-images."""
    from PIL import Image

    pictures = [decode_image(data) for data in images]
    canvas = Image.new(
        "RGB", (sum(p.width for p in pictures), max(p.height for p in pictures)), "white"
    )
    left = 0
    for picture in pictures:
        canvas.paste(picture, (left, 0))
        left += picture.width
    buffer = io.BytesIO()
    canvas.save(buffer, format="PNG")
    return buffer.getvalue()


def scene_text_reader(attacher: ImageAttacher) -> Callable[[bytes], str]:
    """PP-OCR's lines of an image, joined in reading order (see `core.attachments`)."""
    return lambda data: attacher.attach(data).ocr_text


class VLQARunner:
    """One item's choice index; what the checkpoint stores."""

    def __init__(
        self,
        writer: RationaleWriter,
        *,
        images: Path,
        texts: dict[str, str],
        read_text: Callable[[bytes], str] | None = None,
    ) -> None:
        """`read_text(image)` is the scene text of an image (OCR), for text-only engines."""
        self.writer = writer
        self.images = images
        self.texts = texts
        self.read_text = read_text

    def _image(self, item: VLQAItem) -> tuple[bytes | None, str | None]:
        """The image bytes (None without), and why there are none."""
        paths = [image_path(name, self.images) for name in image_names(item) if name]
        if not paths:
            return None, "the item names no image"
        try:
            data = [path.read_bytes() for path in paths]
            if len(data) > 1:
                return side_by_side(data), None
            decode_image(data[0])  # an image the engine could not decode is no image
            return data[0], None
        except FileNotFoundError as exc:
            return None, f"{exc.filename}: no such image"
        except InputError as exc:
            return None, str(exc)

    def __call__(self, item: VLQAItem) -> dict[str, Any]:
        started = time.perf_counter()
        image, image_error = self._image(item)
        texts = [self.texts.get(PurePosixPath(name).name) for name in image_names(item)]
        scene_text = self.read_text(image) if self.read_text and image is not None else ""
        if scene_text:
            texts.append(f"Text in the image: {scene_text}")
        caption = " ".join(text for text in texts if text) or None
        result = self.writer.answer(
            item.question,
            image=image,
            caption=caption,
            choices=list(item.choices),
            knowledge=[Passage(item.passage)] if item.passage else [],
        )
        chosen = result.multiple_choice
        return {
            "answer": item.choices.index(chosen) if chosen is not None else 0,
            "choice_fallback": chosen is None,
            "direct_answer": result.direct_answer,
            "rationale": result.rationale,
            "image_error": image_error,
            "engine_sees_images": self.writer.engine.info.accepts_images,
            "scene_text": scene_text,
            "timings": {**result.timings, "total_s": time.perf_counter() - started},
        }


def build_runner(
    settings: Settings, *, images: Path, texts: dict[str, str], choose: str, ocr: bool
) -> VLQARunner:
    """A runner with its own writer (and OCR reader, for text-only engines with `--ocr`): what
    this process, or each Ray worker, builds."""
    from mmrag.core.components import build_attacher, build_engine, build_rationale_writer

    writer = build_rationale_writer(build_engine(settings), choose)
    read_text = None
    if ocr and not writer.engine.info.accepts_images:
        read_text = scene_text_reader(build_attacher(settings))
    return VLQARunner(writer, images=images, texts=texts, read_text=read_text)


def predictions(
    items: Sequence[VLQAItem], records: dict[str, dict[str, Any]], *, split: str, form: str
) -> dict[str, Any]:
    answers = [records[item.question_id]["answer"] for item in items]
    if form == "official":
        return loader.official_predictions(split, answers)
    return {item.question_id: answer for item, answer in zip(items, answers, strict=True)}


@dataclass
class VLQARunInfo:
    out: Path
    run: dict[str, Any]
    items: list[VLQAItem]
    records: dict[str, dict[str, Any]]
    ran_now: int
    resumed: int
    seconds: float
    sees_images: bool
    answered_by: str = "this process"


def _run_table(info: VLQARunInfo) -> str:
    run = info.run
    engine = run["engine"] + (f" ({run['model']})" if run.get("model") else " (embedded model)")
    shown = "the image itself" if info.sees_images else "text from --captions, else nothing"
    rows = [
        ("data", run["data"]),
        ("images", f"{run['images']} (the engine is shown {shown})"),
        ("captions", run.get("captions") or "none"),
        ("scene text (PP-OCR)", "read in each image" if run["ocr"] else "not read"),
        ("generator", f"{engine}, temperature 0"),
        ("choice", f"by {run['choose']}"),
        ("prediction format", f"{run['format']} (key {run['split']!r})"),
        (
            "questions",
            f"{len(info.items)} ({info.ran_now} answered in this run, {info.resumed} resumed)",
        ),
        ("wall time", f"{info.seconds:.1f} s (this process, models loading included)"),
        ("answered by", info.answered_by),
    ]
    return table(["", ""], rows)


def _scores(info: VLQARunInfo, metrics: dict[str, float] | None) -> str:
    if metrics is None:
        return (
            f"Not scored: `{Path(info.run['data']).name}` has no answer indexes; submit the "
            "prediction file."
        )
    rows = [["mmrag (this run)", number(100 * metrics["accuracy"], 2)]]
    rows += [[f"{b.system} ({b.setting}; {b.source})", number(b.value, 1)] for b in VLQA]
    return (
        "Accuracy x100: the share of items whose chosen index equals the gold `answer`, as the "
        "VLQA site's `evaluate.py` computes it (`evaluation.scoring.vlqa`, the code `mmrag eval "
        "score vlqa` uses).\n\n" + table(["system", "accuracy"], rows)
    )


def _counts(info: VLQARunInfo) -> str:
    records = [info.records[item.question_id] for item in info.items]
    rows = [
        ("items", len(records)),
        ("no image shown (missing or undecodable)", sum(bool(r["image_error"]) for r in records)),
        ("no preference: the first option given", sum(r["choice_fallback"] for r in records)),
    ]
    if info.run["ocr"]:
        rows.append(("images with text read by OCR", sum(bool(r["scene_text"]) for r in records)))
    return table(["", "count"], rows)


def write_chart(info: VLQARunInfo, metrics: dict[str, float]) -> Path:
    path = sibling(info.out, ".accuracy.png")
    bar_chart(
        path,
        [Bar("accuracy", 100 * metrics["accuracy"])],
        title=f"VLQA accuracy: mmrag on {len(info.items)} items\n"
        "published human accuracy (dashed) is on the test set: orientation only",
        ylabel="accuracy (%)",
        references=[Reference(b.value, f"published: {b.label}", "published") for b in VLQA],
    )
    return path


def write_vlqa_report(
    info: VLQARunInfo, metrics: dict[str, float] | None, warnings: list[str]
) -> Path:
    sections = [
        "# mmrag eval run vlqa",
        "> **Not comparable with the published numbers** unless this run covers the whole test "
        f"set: it answered {len(info.items)} items of `{Path(info.run['data']).name}`.",
        "## Run",
        _run_table(info),
        "## Scores",
        _scores(info, metrics),
        "## Counts",
        _counts(info),
        "## Mean time per item",
        timing_table([info.records[item.question_id]["timings"] for item in info.items]),
    ]
    if metrics is not None:
        sections += ["## Chart", f"![accuracy]({write_chart(info, metrics).name})"]
    if warnings:
        sections += ["## Scoring notes", "\n".join(f"- {w}" for w in warnings)]
    report = sibling(info.out, ".report.md")
    atomic_write_text(report, "\n\n".join(sections) + "\n")
    return report


def add_parser(benches: argparse._SubParsersAction) -> None:
    vlqa = benches.add_parser(
        "vlqa",
        help="VLQA: image + passage multiple choice; accuracy",
        description='Writes {"val": [answer index per item]} (the official format).',
    )
    vlqa.add_argument("--data", type=Path, required=True, help="VLQA val.json (or test, train)")
    vlqa.add_argument("--images", type=Path, required=True, help="folder of the images")
    add_run_options(vlqa)
    vlqa.add_argument("--split", default="val", help="the official file's key (default val)")
    vlqa.add_argument(
        "--format",
        choices=FORMATS,
        default="official",
        help='official: {"val": [index, ...]}; by-id: {question_id: index}',
    )
    vlqa.add_argument(
        "--skip-missing", action="store_true", help="answer items whose image is missing from text"
    )
    vlqa.add_argument(
        "--captions",
        type=Path,
        help="JSON {image file name: caption or OCR text} for engines without vision",
    )
    vlqa.add_argument(
        "--ocr",
        action="store_true",
        help="read each image's text with PP-OCR for engines without vision (about 1 s each)",
    )
    vlqa.add_argument("--choose", choices=CHOOSERS, default="similarity")
    add_config_option(vlqa)
    add_generation_options(vlqa)
    setting_flag(vlqa, "device")
    vlqa.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:

    started = time.perf_counter()
    check_run_options(args)
    check_file("--captions", args.captions)
    items = loader.load_gold(args.data)[: args.limit]
    if not args.images.is_dir():
        raise EvaluationError(f"--images {args.images}: no such folder")
    missing = missing_images(items, args.images)
    if missing and not args.skip_missing:
        raise EvaluationError(
            f"{missing[0]}: no such image ({len(missing)} missing); check --images, or pass "
            "--skip-missing to answer those items from text alone"
        )
    texts = load_texts(args.captions)
    settings = settings_from(args)
    description = {
        "bench": "vlqa",
        "data": str(args.data.resolve()),
        "images": str(args.images.resolve()),
        "captions": str(args.captions.resolve()) if args.captions else None,
        "choose": args.choose,
        "ocr": args.ocr,
        "split": args.split,
        "format": args.format,
        **settings.model_dump(mode="json", include={"engine", "model", "engine_url", "vision"}),
    }
    checkpoint = Checkpoint.open(args.out, description, resume=args.resume)
    remote = partial(
        build_runner, images=args.images, texts=texts, choose=args.choose, ocr=args.ocr
    )
    with Answering(args, settings, remote) as answering:
        ran = answering.run(items, lambda item: item.question_id, checkpoint, desc="vlqa")
    written = predictions(items, checkpoint.records, split=args.split, form=args.format)
    checkpoint.finish(args.out, json.dumps(written, indent=2) + "\n")

    metrics, warnings = None, []
    if all(item.answer is not None for item in items):
        report = scoring.score(
            items,
            loader.load_predictions(args.out),
            gold_label=str(args.data),
            pred_label=str(args.out),
        )
        metrics, warnings = report.metrics, report.warnings
    print_warnings(warnings)
    info = VLQARunInfo(
        out=args.out,
        run=checkpoint.run,
        items=items,
        records=checkpoint.records,
        ran_now=ran,
        resumed=len(items) - ran,
        seconds=time.perf_counter() - started,
        sees_images=any(record.get("engine_sees_images") for record in checkpoint.records.values()),
        answered_by=answering.describe(),
    )
    report_path = write_vlqa_report(info, metrics, warnings)
    scored = "not scored" if metrics is None else f"accuracy {number(100 * metrics['accuracy'], 2)}"
    print(
        f"vlqa: {len(items)} items ({ran} answered, {info.resumed} resumed) in "
        f"{info.seconds:.1f} s; {scored}; wrote {args.out}, {report_path}"
    )
    return 0
