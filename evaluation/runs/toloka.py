"""`mmrag eval run toloka`: Toloka VQA (WSDM Cup 2023) grounding, scored and reported.

Each question's image is found in `--images` by the file name of its URL (nothing is
downloaded), grounded by the configured strategy (`generation.grounding`: the generator names
the answer and `--detector` boxes it, or `--grounder vlm`; `toloka_runner`), and its box goes
into the competition's submission CSV (`image,left,top,right,bottom`, the columns the starter
kit's reproduction writes). The CSV lists every question: one that `--skip-missing` leaves
unanswered gets the empty box, which scores as a missing row does. The report counts why a
question has no box of its own and sets the paper's private-test table beside the scores.
"""

from __future__ import annotations

import argparse
import csv
import io
from collections import Counter
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from mmrag.core.options import add_config_option, add_generation_options, add_grounding_options
from mmrag.evaluation.errors import EvaluationError
from mmrag.evaluation.loaders import toloka as toloka_loader
from mmrag.evaluation.loaders.toloka import BOX_COLUMNS, TolokaItem
from mmrag.evaluation.runs.report import TOLOKA, Bar, Chart, Reference, engine_name, number, table
from mmrag.evaluation.runs.spec import Benchmark, Figure, Record, RecordFields, RunInfo
from mmrag.evaluation.runs.toloka_runner import (
    MISSING,
    NO_BOX,
    build_runner,
    empty,
    image_file,
    submission_box,
)
from mmrag.evaluation.scoring import ScoreReport
from mmrag.evaluation.scoring import toloka as toloka_scoring

if TYPE_CHECKING:  # models load only when a run starts; `mmrag --help` stays instant
    from mmrag.core.settings import Settings


class TolokaRecord(RecordFields):
    box: Annotated[list[float], Field(min_length=4, max_length=4)] | None
    reason: str | None = None
    error: str | None = None
    query: str | None = None
    rescaled: bool = False


class TolokaRun(Benchmark[TolokaItem]):
    record_fields = TolokaRecord
    name = "toloka"
    help = "Toloka VQA (WSDM Cup 2023): one box per question; IoU, IoU>0.5, IoU>0.7"
    description = "Writes the competition's submission CSV (image,left,top,right,bottom)."
    loader, scoring = toloka_loader, toloka_scoring
    data_help = "release CSV (train, test_public, test_private)"
    images_option = "--images"
    images_help = "folder of the images, by URL file name"
    skipped_in_submission = "the CSV lists every question, so they get the empty box (scored 0)"
    described_settings = ("grounder", "detector", "engine", "model", "engine_url", "vision")
    headline = (Figure("IoU", "iou"), Figure("IoU>0.5", "iou_gt_50"))
    headline += (Figure("IoU>0.7", "iou_gt_70"),)
    comparable_when = "this run covers the whole private test (4,504 questions)"
    orientation = "The paper's table is shown for orientation."
    no_gold = "no gold boxes"

    @staticmethod
    def add_options(parser: argparse.ArgumentParser) -> None:
        add_config_option(parser)
        add_generation_options(parser)
        add_grounding_options(parser)

    def load(self) -> list[TolokaItem]:
        return toloka_loader.load_questions(self.args.data)

    def key(self, item: TolokaItem) -> str:
        return item.image

    def image_paths(self, item: TolokaItem) -> list[Path]:
        return [image_file(item, self.args.images)]

    def unanswered(self, item: TolokaItem, missing: Path) -> Record:
        return empty(MISSING, f"{missing}: no such image")  # the CSV lists every question

    def settings(self) -> Settings:
        from mmrag.core.components import grounding_problem

        settings = super().settings()
        if (problem := grounding_problem(settings)) is not None:
            raise EvaluationError(problem)
        return settings

    def runner_factory(self, settings: Settings, todo: Sequence[TolokaItem]) -> partial[Any]:
        return partial(build_runner, images=self.args.images)

    def submission(self, items: Sequence[TolokaItem], records: dict[str, Record]) -> str:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["image", *BOX_COLUMNS])
        for item in items:
            writer.writerow([item.image, *submission_box(records[item.image])])
        return buffer.getvalue()

    def scorable(self, items: Sequence[TolokaItem]) -> bool:
        return all(item.box is not None for item in items)

    def score(self, items: Sequence[TolokaItem], records: dict[str, Record]) -> ScoreReport:
        gold, out = {item.image: item for item in items}, self.args.out
        return self.scoring.score(gold, self.loader.load_predictions(out), pred_label=str(out))

    def counts(self, info: RunInfo[TolokaItem]) -> list[str]:
        records = info.all_records()
        empty = sum(record.get("box") is None for record in records)
        whole = sum(record.get("reason") == NO_BOX for record in records)
        return [f"{empty} empty boxes", f"{whole} whole images"]

    def run_rows(self, info: RunInfo[TolokaItem]) -> list[tuple[str, Any]]:
        run = info.run
        if run["grounder"] == "vlm":
            strategy = f"a grounding VLM writes the box: {engine_name(run)}, bbox_2d JSON"
        else:
            detector = f"detector `{run['detector']}` boxes it (best box)"
            strategy = f"{engine_name(run)} names the object, {detector}"
        return [("images", run["images"]), ("grounding", strategy)]

    def scores_section(self, info: RunInfo[TolokaItem], scores: ScoreReport) -> str:
        metrics = scores.metrics
        ours = ["mmrag (this run)"]
        ours += [number(metrics[name], 3) for name in ("iou", "iou_gt_50", "iou_gt_70")]
        published = [[b.system, number(b.value, 3), "-", "-"] for b in TOLOKA]
        return (
            "Mean IoU x100 and the shares of questions with IoU above 0.5 and 0.7, computed "
            "from the submission as written (`evaluation.scoring.toloka`, the code `mmrag eval "
            "score toloka` uses); empty boxes score 0, whole-image boxes the gold box's share of "
            "the image. Published figures: the Toloka VQA paper's private test "
            "(4,504 questions).\n\n"
            + table(["system", "IoU", "IoU > 0.5", "IoU > 0.7"], [ours, *published])
        )

    def count_rows(self, info: RunInfo[TolokaItem]) -> list[tuple[str, Any]]:
        records = info.all_records()
        reasons = Counter(record["reason"] for record in records if record.get("reason"))
        rows = [("questions with a box", len(records) - sum(reasons.values()))]
        for why, count in sorted(reasons.items()):
            rows.append((f"{'whole image' if why == NO_BOX else 'empty box'}: {why}", count))
        rescaled = sum(bool(record.get("rescaled")) for record in records)
        rows.append(("boxes mapped to the CSV's width x height", rescaled))
        if info.run["grounder"] == "detector":
            asked = sum(info.record(i).get("query") == i.question for i in info.items)
            rows.append(("detector queried with the question (the generator named nothing)", asked))
        return rows

    def sections(self, info: RunInfo[TolokaItem], scores: ScoreReport | None) -> list[str]:
        records = info.all_records()
        named = Counter(record.get("query") for record in records if record.get("query"))
        sections = [
            "## Most frequent queries",
            table(["looked for", "questions"], named.most_common(10)),
        ]
        failed = [
            [item.image, record["reason"], record.get("error") or ""]
            for item, record in zip(info.items, records, strict=True)
            if record.get("reason")
        ]
        if failed:
            more = f"\n\n... and {len(failed) - 10} more" if len(failed) > 10 else ""
            body = table(["image", "why", "detail"], failed[:10]) + more
            sections += ["## Questions without a box of their own", body]
        return sections

    def charts(self, info: RunInfo[TolokaItem], scores: ScoreReport) -> list[Chart]:
        metrics = scores.metrics
        bars = [
            Bar("mean IoU", metrics["iou"]),
            Bar("IoU > 0.5 (%)", 100 * metrics["iou_gt_50"]),
            Bar("IoU > 0.7 (%)", 100 * metrics["iou_gt_70"]),
        ]
        title = f"Toloka VQA: mmrag on {len(info.items)} questions\n"
        title += "published (dashed, over mean IoU) are on the private test: orientation only"
        label = "published mean IoU"
        references = [
            Reference(b.value, f"{label}: {b.label}", "published", (0, 0)) for b in TOLOKA
        ]
        ylabel = "IoU x100 / % of questions"
        return [
            Chart(".iou.png", "IoU beside the published table", bars, title, ylabel, references)
        ]
