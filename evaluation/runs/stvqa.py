"""`mmrag eval run stvqa`: scene-text VQA with PP-OCR and the generator (`stvqa_runner`),
scored by ANLS.

The submission is the competition's `[{"question_id", "answer"}]`, scored by ANLS and
exact-match accuracy when the file has answers. The published task-3 figure stands beside
ours, labelled not comparable unless the data is the official test set (whose answers are not
public, so such a run is never scored here).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmrag.core.options import add_config_option, add_generation_options, setting_flag
from mmrag.evaluation.errors import EvaluationError
from mmrag.evaluation.loaders import stvqa as stvqa_loader
from mmrag.evaluation.loaders.stvqa import STVQAItem
from mmrag.evaluation.metrics.anls import anls_score
from mmrag.evaluation.runs.report import (
    Bar,
    Chart,
    Published,
    Reference,
    engine_name,
    number,
    table,
)
from mmrag.evaluation.runs.spec import Benchmark, Figure, Record, RecordFields, RunInfo
from mmrag.evaluation.runs.stvqa_runner import build_runner, read_images
from mmrag.evaluation.scoring import ScoreReport
from mmrag.evaluation.scoring import stvqa as stvqa_scoring
from mmrag.generation.scene_text import ANSWER_MODES, DEFAULT_MODE

if TYPE_CHECKING:
    from mmrag.core.settings import Settings

STVQA_PAPER = "ST-VQA challenge (ICDAR 2019), task 3 test set"
PUBLISHED = (Published("anls", 0.282, "VTA", "task 3", "all", STVQA_PAPER),)


def submission_id(question_id: str) -> int | str:
    """As the release writes them: integer ids stay integers."""
    return int(question_id) if question_id.isdigit() else question_id


class STVQARecord(RecordFields):
    prediction: str
    ocr_lines: list[str]


class STVQARun(Benchmark[STVQAItem]):
    record_fields = STVQARecord
    name = "stvqa"
    help = "ST-VQA: OCR the image, answer in a few words; ANLS and accuracy"
    description = 'Writes [{"question_id": ..., "answer": "..."}] (the ST-VQA submission).'
    loader, scoring = stvqa_loader, stvqa_scoring
    data_help = "ST-VQA release JSON ({data: [...]})"
    images_option = "--images"
    images_help = "root the file_path fields are relative to"
    described_options = ("answer",)
    described_settings = ("engine", "model", "engine_url", "max_tokens", "ocr_min_confidence")
    described_settings += ("ocr_det_model", "ocr_rec_model")
    headline = (Figure("ANLS", "anls"), Figure("accuracy", "accuracy"))
    comparable_when = (
        "these are the questions of the official ST-VQA task-3 test set, scored by the "
        "challenge server (its answers are not public)"
    )
    orientation = "The published figure is shown for orientation only."

    @staticmethod
    def add_options(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--answer",
            choices=ANSWER_MODES,
            default=DEFAULT_MODE,
            help="free: the model writes the answer; likelihood: the OCR span the model "
            "likeliest opens with; similarity: the free answer snapped to the nearest OCR span "
            "(default %(default)s, the best measured)",
        )
        parser.add_argument(
            "--ocr-workers",
            type=int,
            default=os.cpu_count() or 1,
            help="OCR processes (default: one per core)",
        )
        parser.add_argument(
            "--ocr-cache",
            type=Path,
            help="lines read per image, shared by runs over the same images (default "
            "OUT.ocr.jsonl)",
        )
        for name in ("ocr_min_confidence", "ocr_det_model", "ocr_rec_model", "max_image_pixels"):
            setting_flag(parser, name)
        add_config_option(parser)
        setting_flag(parser, "device")
        add_generation_options(parser)

    def check(self) -> None:
        if self.args.ocr_workers < 1:
            raise EvaluationError(f"--ocr-workers must be at least 1, got {self.args.ocr_workers}")

    def load(self) -> list[STVQAItem]:
        return stvqa_loader.load_gold(self.args.data)

    def key(self, item: STVQAItem) -> str:
        return item.question_id

    def image_paths(self, item: STVQAItem) -> list[Path]:
        return [self.args.images / item.image]

    def settings(self) -> Settings:
        settings = super().settings()
        settings.ocr_models.check()
        return settings

    def runner_factory(self, settings: Settings, todo: Sequence[STVQAItem]) -> partial[Any]:
        lines = read_images(todo, self.args.images, self.args, settings)
        return partial(build_runner, mode=self.args.answer, lines=lines, root=self.args.images)

    def submission(self, items: Sequence[STVQAItem], records: dict[str, Record]) -> str:
        answers = [
            {"question_id": submission_id(qid), "answer": records[qid]["prediction"]}
            for qid in (item.question_id for item in items)
        ]
        return json.dumps(answers, indent=2, ensure_ascii=False) + "\n"

    def scorable(self, items: Sequence[STVQAItem]) -> bool:
        return any(item.answers for item in items)

    def run_rows(self, info: RunInfo[STVQAItem]) -> list[tuple[str, Any]]:
        run = info.run
        ocr = f"PP-OCR (rapidocr-onnxruntime), lines of confidence >= {run['ocr_min_confidence']}"
        answer = f"{run['answer']} ({engine_name(run)}, temperature 0)"
        return [("images", run["images"]), ("OCR", ocr), ("answer", answer)]

    def scores_section(self, info: RunInfo[STVQAItem], scores: ScoreReport) -> str:
        published = "; ".join(f"{b.system} {b.value:g} ({b.setting})" for b in PUBLISHED)
        rows = [
            ["ANLS", number(scores.metrics["anls"]), published],
            ["accuracy (exact match)", number(scores.metrics["accuracy"]), "-"],
        ]
        return (
            "ANLS (tau 0.5) and exact-match accuracy, means over questions with answers, by "
            "`evaluation.scoring.stvqa` (the code `mmrag eval score stvqa` uses).\n\n"
            + table(["metric", "ours", "published"], rows)
        )

    def count_rows(self, info: RunInfo[STVQAItem]) -> list[tuple[str, Any]]:
        from mmrag.generation.scene_text import candidates

        records = info.all_records()
        answers = [record["prediction"] for record in records]
        read = [" ".join(record["ocr_lines"]).lower() for record in records]
        copied = sum(bool(a) and a.lower() in text for a, text in zip(answers, read, strict=True))
        rows = [
            ("questions whose image had no text read", sum(not r["ocr_lines"] for r in records)),
            ("empty answers", sum(not answer.strip() for answer in answers)),
            ("answers copied from the text read", copied),
        ]
        reachable = [  # the choosers' ceiling: the best span OCR offered
            max(
                (anls_score(span, item.answers) for span in candidates(r["ocr_lines"])), default=0.0
            )
            for item, r in zip(info.items, records, strict=True)
            if item.answers
        ]
        if reachable:
            ceiling = number(sum(reachable) / len(reachable))
            rows.append(("ANLS if the best OCR candidate were always chosen", ceiling))
        return rows

    def charts(self, info: RunInfo[STVQAItem], scores: ScoreReport) -> list[Chart]:
        metrics = scores.metrics
        bars = [Bar("ANLS", 100 * metrics["anls"]), Bar("accuracy", 100 * metrics["accuracy"])]
        references = [
            Reference(100 * b.value, f"published: {b.label}", "published", (0, 0))
            for b in PUBLISHED
        ]
        title = f"ST-VQA: mmrag ({info.run['answer']}), {len(info.items)} questions\n"
        title += "published VTA (dashed) is task 3's test set: orientation only"
        return [Chart(".anls.png", "ANLS and accuracy", bars, title, "score (x100)", references)]
