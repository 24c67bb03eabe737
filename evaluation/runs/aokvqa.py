"""`mmrag eval run aokvqa`: A-OKVQA through the rationale writer (`aokvqa_runner`), scored
and reported.

Images are COCO's, under `--coco-dir` by split; text-only engines get `--captions` instead, and
`--index` adds retrieved knowledge, as in `mmrag rationale`. The report sets MC and DA beside
GPV-2's; those are for the whole val or test split, so a `--limit`ed run, one with skipped
images or on a small fixture is not comparable, and the report says so.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from mmrag.core.options import add_config_option, add_generation_options, add_retrieval_options
from mmrag.evaluation.errors import DatasetError
from mmrag.evaluation.io import read_json
from mmrag.evaluation.loaders import aokvqa as aokvqa_loader
from mmrag.evaluation.loaders.aokvqa import AOKVQAItem
from mmrag.evaluation.runs.aokvqa_runner import build_runner
from mmrag.evaluation.runs.checkpoint import check_file
from mmrag.evaluation.runs.report import (
    Bar,
    Chart,
    Reference,
    aokvqa_baselines,
    engine_name,
    number,
    table,
)
from mmrag.evaluation.runs.spec import Benchmark, Figure, Record, RecordFields, RunInfo
from mmrag.evaluation.scoring import ScoreReport
from mmrag.evaluation.scoring import aokvqa as aokvqa_scoring
from mmrag.generation.rationale import CHOOSERS

if TYPE_CHECKING:  # models load only when a run starts; `mmrag --help` stays instant
    from mmrag.core.settings import Settings

LABELS = {"mc": "MC accuracy", "da": "DA accuracy", "bleu": "rationale BLEU", "meteor": "METEOR"}


def load_captions(path: Path | None) -> dict[str, str]:
    """`{image_id: caption}`; ids as strings so "397133", 397133 and "000000397133" agree."""
    if path is None:
        return {}
    data = read_json(path)
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: expected a JSON object {{image_id: caption}}")
    captions: dict[str, str] = {}
    for key, caption in data.items():
        if not isinstance(caption, str):
            raise DatasetError(f"{path}: caption of image {key} is not a string")
        try:
            captions[str(int(key))] = caption
        except ValueError:
            raise DatasetError(f"{path}: {key!r} is not a COCO image id") from None
    return captions


class AOKVQAPrediction(BaseModel):
    model_config = ConfigDict(strict=True)

    multiple_choice: str | None
    direct_answer: str
    rationale: str = ""


class AOKVQARecord(RecordFields):
    prediction: AOKVQAPrediction
    choice_fallback: bool = False


class AOKVQARun(Benchmark[AOKVQAItem]):
    record_fields = AOKVQARecord
    name = "aokvqa"
    help = "A-OKVQA: rationale, direct answer, multiple choice; MC, DA, BLEU, METEOR"
    description = "Writes {question_id: {multiple_choice, direct_answer, rationale}}."
    loader, scoring = aokvqa_loader, aokvqa_scoring
    data_help = "aokvqa_v1p0_{split}.json"
    images_option = "--coco-dir"
    images_help = "holds {split}2017/*.jpg"
    images_hint = "--coco-dir and --split"
    described_options = ("captions", "index", "knowledge", "choose")
    described_settings = ("engine", "model", "engine_url", "retrievers", "fusion")
    headline = (Figure("MC", "mc", 2), Figure("DA", "da", 2), Figure("BLEU", "bleu", 2))
    headline += (Figure("METEOR", "meteor"),)
    label = "aokvqa {split}"
    heading = "aokvqa: split {split}"
    comparable_when = "this run covers the whole A-OKVQA {split} split"
    orientation = "Baselines are shown for orientation only, labelled with their split."
    no_gold = "no answers in this split"

    @classmethod
    def add_inputs(cls, parser: argparse.ArgumentParser) -> None:
        super().add_inputs(parser)
        parser.add_argument("--split", help="COCO split (default: from the file name, else val)")

    @staticmethod
    def add_options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--captions", type=Path, help="JSON {image_id: caption} for engines without vision"
        )
        parser.add_argument("--index", type=Path, help="retrieve knowledge from this index")
        parser.add_argument("--knowledge", type=int, default=2, help="sources from --index")
        parser.add_argument("--choose", choices=CHOOSERS, default="similarity")
        add_config_option(parser)
        add_retrieval_options(parser)
        add_generation_options(parser)

    def check(self) -> None:
        check_file("--captions", self.args.captions)

    def load(self) -> list[AOKVQAItem]:
        items = aokvqa_loader.load_gold(self.args.data)
        self.split = self.args.split or (items[0].split if items else None) or "val"
        self.captions = load_captions(self.args.captions)
        return items

    def key(self, item: AOKVQAItem) -> str:
        return item.question_id

    def image_paths(self, item: AOKVQAItem) -> list[Path]:
        return [item.image_path(self.args.coco_dir, self.split)]

    def settings(self) -> Settings:
        settings = super().settings()
        if self.args.index is None:
            return settings
        return settings.model_copy(update={"index": self.args.index})

    def describe(self, settings: Settings) -> dict[str, Any]:
        return {**super().describe(settings), "split": self.split}

    def runner_factory(self, settings: Settings, todo: Sequence[AOKVQAItem]) -> partial[Any]:
        args = self.args
        return partial(
            build_runner,
            choose=args.choose,
            coco_dir=args.coco_dir,
            split=self.split,
            captions=self.captions,
            knowledge=args.knowledge,
            retrieve=args.index is not None,
        )

    def submission(self, items: Sequence[AOKVQAItem], records: dict[str, Record]) -> str:
        predictions = {item.question_id: records[item.question_id]["prediction"] for item in items}
        return json.dumps(predictions, indent=2) + "\n"

    def scorable(self, items: Sequence[AOKVQAItem]) -> bool:
        return all(item.correct_choice_idx is not None for item in items)

    def run_rows(self, info: RunInfo[AOKVQAItem]) -> list[tuple[str, Any]]:
        run = info.run
        knowledge = "none"
        if run.get("index"):
            knowledge = f"{run['knowledge']} sources per question from {run['index']}"
        return [
            ("split / images", f"{run['split']} / {run['coco_dir']}/{run['split']}2017"),
            ("captions", run.get("captions") or "none (engines without vision see no image)"),
            ("knowledge", knowledge),
            ("generator", f"{engine_name(run)}, temperature 0"),
            ("multiple choice", f"by {run['choose']}"),
        ]

    def scores_section(self, info: RunInfo[AOKVQAItem], scores: ScoreReport) -> str:
        published = aokvqa_baselines(info.run["split"])
        rows = []
        for metric, label in LABELS.items():
            reference = "; ".join(
                f"{b.system} {b.value:g}" for b in published if b.metric == metric
            )
            digits = 3 if metric == "meteor" else 2  # MC, DA, BLEU 0..100 as published; METEOR 0..1
            rows.append([label, number(scores.metrics.get(metric), digits), reference or "-"])
        return (
            "MC and DA as the official script scores them (x100; DA leaves out questions marked "
            "`difficult_direct_answer`); rationales by SacreBLEU and METEOR against the three "
            "references (`evaluation.scoring.aokvqa`, the code `mmrag eval score aokvqa` uses)."
            "\n\n" + table(["metric", "ours", f"published ({info.run['split']} split)"], rows)
        )

    def count_rows(self, info: RunInfo[AOKVQAItem]) -> list[tuple[str, Any]]:
        difficult = sum(item.difficult_direct_answer for item in info.items)
        fallbacks = sum(bool(record.get("choice_fallback")) for record in info.all_records())
        return [
            ("questions scored for MC", len(info.items)),
            ("questions scored for DA (not difficult)", len(info.items) - difficult),
            ("MC answers where the chooser had no preference (first choice given)", fallbacks),
        ]

    def charts(self, info: RunInfo[AOKVQAItem], scores: ScoreReport) -> list[Chart]:
        split = info.run["split"]
        bars = [Bar("MC", scores.metrics.get("mc")), Bar("DA", scores.metrics.get("da"))]
        references = [
            Reference(b.value, f"published {metric.upper()}: {b.label}", "published", (at, at))
            for at, metric in enumerate(("mc", "da"))
            for b in aokvqa_baselines(split)
            if b.metric == metric and b.system == "GPV-2"
        ]
        title = f"A-OKVQA accuracy: mmrag, {split} ({len(info.items)} questions)\n"
        title += "published GPV-2 (dashed) is on the whole split: orientation only"
        return [
            Chart(".accuracy.png", "MC and DA accuracy", bars, title, "accuracy (%)", references)
        ]
