"""`mmrag eval run vlqa`: VLQA (image + passage multiple choice) through the A-OKVQA mode
(`vlqa_runner`): the choice is the option nearest the direct answer (`--choose similarity`)
or the likeliest option letter (`likelihood`), as in `mmrag rationale`.

The prediction file is the official one the VLQA site's `static/evaluate.py` reads,
`{"val": [answer index per item, in gold order]}` (`--split` names the key), or
`{question_id: index}` with `--format by-id`; every item it holds gets an index (the first
option when the chooser had no preference, counted in the report). The official list has no
way to leave an item out, so `--skip-missing` needs `--format by-id`; `--answer-without-image`
answers such items from their passage, as an image that does not decode always is.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from functools import partial
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from mmrag.core.options import add_config_option, add_generation_options, setting_flag
from mmrag.evaluation.errors import DatasetError, EvaluationError
from mmrag.evaluation.io import read_json
from mmrag.evaluation.loaders import vlqa as vlqa_loader
from mmrag.evaluation.loaders.vlqa import VLQAItem
from mmrag.evaluation.runs.checkpoint import check_file
from mmrag.evaluation.runs.report import VLQA, Bar, Chart, Reference, engine_name, number, table
from mmrag.evaluation.runs.spec import Benchmark, Figure, Record, RecordFields, RunInfo
from mmrag.evaluation.runs.vlqa_runner import build_runner, image_names, image_path
from mmrag.evaluation.scoring import ScoreReport
from mmrag.evaluation.scoring import vlqa as vlqa_scoring
from mmrag.generation.rationale import CHOOSERS

if TYPE_CHECKING:  # models load only when a run starts; `mmrag --help` stays instant
    from mmrag.core.settings import Settings

FORMATS = ("official", "by-id")


def load_texts(path: Path | None) -> dict[str, str]:
    """`{image file name: text}`: what a text-only engine is told about each image."""
    if path is None:
        return {}
    data = read_json(path)
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise DatasetError(f"{path}: expected a JSON object {{image file name: text}}")
    return {PurePosixPath(name).name: text for name, text in data.items()}


class VLQARecord(RecordFields):
    answer: int
    choice_fallback: bool = False
    engine_sees_images: bool = False


class VLQARun(Benchmark[VLQAItem]):
    record_fields = VLQARecord
    name = "vlqa"
    help = "VLQA: image + passage multiple choice; accuracy"
    description = 'Writes {"val": [answer index per item]} (the official format).'
    loader, scoring = vlqa_loader, vlqa_scoring
    data_help = "VLQA val.json (or test, train)"
    images_option = "--images"
    images_help = "folder of the images"
    answers_without_image = True
    skipped_in_submission = "they are left out of a --format by-id file"
    described_options = ("captions", "choose", "ocr", "split", "format")
    described_settings = ("engine", "model", "engine_url", "vision")
    headline = (Figure("accuracy", "accuracy", 2, 100),)
    noun = "item"
    comparable_when = "this run covers the whole test set"
    no_gold = "no answer indexes"

    @staticmethod
    def add_options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--split", default="val", help="the official file's key (default val)")
        parser.add_argument(
            "--format",
            choices=FORMATS,
            default="official",
            help='official: {"val": [index, ...]}; by-id: {question_id: index}',
        )
        parser.add_argument(
            "--captions",
            type=Path,
            help="JSON {image file name: caption or OCR text} for engines without vision",
        )
        parser.add_argument(
            "--ocr",
            action="store_true",
            help="read each image's text with PP-OCR for engines without vision (about 1 s each)",
        )
        parser.add_argument("--choose", choices=CHOOSERS, default="similarity")
        add_config_option(parser)
        add_generation_options(parser)
        setting_flag(parser, "device")

    def check(self) -> None:
        check_file("--captions", self.args.captions)
        if self.args.skip_missing and self.args.format == "official":
            raise EvaluationError(
                "--skip-missing leaves items out, and the official VLQA file holds an index for "
                "every item: pass --format by-id, or --answer-without-image to answer them from "
                "their passage"
            )

    def load(self) -> list[VLQAItem]:
        self.texts = load_texts(self.args.captions)
        return vlqa_loader.load_gold(self.args.data)

    def key(self, item: VLQAItem) -> str:
        return item.question_id

    def image_paths(self, item: VLQAItem) -> list[Path]:
        return [image_path(name, self.args.images) for name in image_names(item) if name]

    def runner_factory(self, settings: Settings, todo: Sequence[VLQAItem]) -> partial[Any]:
        args = self.args
        options = {"images": args.images, "texts": self.texts, "choose": args.choose}
        return partial(build_runner, ocr=args.ocr, **options)

    def submission(self, items: Sequence[VLQAItem], records: dict[str, Record]) -> str:
        answers = [records[item.question_id]["answer"] for item in items]
        if self.args.format == "official":
            written: dict[str, Any] = vlqa_loader.official_predictions(self.args.split, answers)
        else:
            written = {
                item.question_id: answer for item, answer in zip(items, answers, strict=True)
            }
        return json.dumps(written, indent=2) + "\n"

    def scorable(self, items: Sequence[VLQAItem]) -> bool:
        return all(item.answer is not None for item in items)

    def run_rows(self, info: RunInfo[VLQAItem]) -> list[tuple[str, Any]]:
        run = info.run
        sees = any(record.get("engine_sees_images") for record in info.records.values())
        shown = "the image itself" if sees else "text from --captions, else nothing"
        return [
            ("images", f"{run['images']} (the engine is shown {shown})"),
            ("captions", run.get("captions") or "none"),
            ("scene text (PP-OCR)", "read in each image" if run["ocr"] else "not read"),
            ("generator", f"{engine_name(run)}, temperature 0"),
            ("choice", f"by {run['choose']}"),
            ("prediction format", f"{run['format']} (key {run['split']!r})"),
        ]

    def scores_section(self, info: RunInfo[VLQAItem], scores: ScoreReport) -> str:
        rows = [["mmrag (this run)", number(100 * scores.metrics["accuracy"], 2)]]
        rows += [[f"{b.system} ({b.setting}; {b.source})", number(b.value, 1)] for b in VLQA]
        return (
            "Accuracy x100: the share of items whose chosen index equals the gold `answer`, as "
            "the VLQA site's `evaluate.py` computes it (`evaluation.scoring.vlqa`, the code `mmrag "
            "eval score vlqa` uses).\n\n" + table(["system", "accuracy"], rows)
        )

    def count_rows(self, info: RunInfo[VLQAItem]) -> list[tuple[str, Any]]:
        records = info.all_records()
        rows = [
            ("items", len(records)),
            (
                "no image shown (missing or undecodable)",
                sum(bool(r["image_error"]) for r in records),
            ),
            ("no preference: the first option given", sum(r["choice_fallback"] for r in records)),
        ]
        if info.run["ocr"]:
            rows.append(
                ("images with text read by OCR", sum(bool(r["scene_text"]) for r in records))
            )
        return rows

    def charts(self, info: RunInfo[VLQAItem], scores: ScoreReport) -> list[Chart]:
        bars = [Bar("accuracy", 100 * scores.metrics["accuracy"])]
        title = f"VLQA accuracy: mmrag on {len(info.items)} items\n"
        title += "published human accuracy (dashed) is on the test set: orientation only"
        references = [Reference(b.value, f"published: {b.label}", "published") for b in VLQA]
        return [Chart(".accuracy.png", "accuracy", bars, title, "accuracy (%)", references)]
