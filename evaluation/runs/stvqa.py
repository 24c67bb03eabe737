"""`mmrag eval run stvqa`: scene-text VQA with PP-OCR and the generator, scored by ANLS.

Steps, each refusable input checked before models load: the release file's questions
(`--limit`), their images under `--images` (missing: an error, or left out with
`--skip-missing`), the partial file (`--resume`); then the OCR pass over every distinct image,
parallel and cached in `OUT.ocr.jsonl` (keyed by image content, so a rerun or a resumed run
reads no image twice); the engine (and MiniLM for `--answer similarity`); the question loop,
each answer appended to the partial file; the submission `[{"question_id", "answer"}]` written
atomically, read back and scored as `eval score stvqa` would (ANLS and exact-match accuracy,
when the file has answers); the report (`OUT.report.md`, `OUT.anls.png`) with the published
task-3 figure beside ours, labelled not comparable unless the data is the official test set
(whose answers are not public, so such a run is never scored here).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmrag.core.options import (
    add_config_option,
    add_generation_options,
    setting_flag,
    settings_from,
)
from mmrag.evaluation.errors import EvaluationError
from mmrag.evaluation.loaders import stvqa as loader
from mmrag.evaluation.loaders.stvqa import STVQAItem
from mmrag.evaluation.metrics.anls import anls_score
from mmrag.evaluation.runs.checkpoint import (
    Answering,
    Checkpoint,
    add_run_options,
    check_run_options,
    print_warnings,
    sibling,
)
from mmrag.evaluation.runs.report import (
    Bar,
    Published,
    Reference,
    bar_chart,
    number,
    table,
    timing_table,
)
from mmrag.evaluation.scoring import stvqa as scoring
from mmrag.generation.scene_text import ANSWER_MODES, DEFAULT_MODE
from mmrag.indexes.atomic import atomic_write_text

if TYPE_CHECKING:
    from mmrag.core.settings import Settings
    from mmrag.generation.scene_text import SceneTextAnswerer

STVQA_PAPER = "ST-VQA challenge (ICDAR 2019), task 3 test set"
PUBLISHED = (Published("anls", 0.282, "VTA", "task 3", "all", STVQA_PAPER),)


def image_path(item: STVQAItem, root: Path) -> Path:
    return root / item.image


def submission_id(question_id: str) -> int | str:
    """As the release writes them: integer ids stay integers."""
    return int(question_id) if question_id.isdigit() else question_id


class STVQARunner:
    """Answers one question from its image's OCR lines; returns what the checkpoint stores."""

    def __init__(
        self,
        answerer: SceneTextAnswerer,
        lines: dict[str, list[str]],
        root: Path,
    ) -> None:
        self.answerer = answerer
        self.lines = lines  # image path -> kept OCR lines, read before the question loop
        self.root = root

    def __call__(self, item: STVQAItem) -> dict[str, Any]:
        started = time.perf_counter()
        path = image_path(item, self.root)
        lines = self.lines.get(item.image) or []
        image = path.read_bytes() if self.answerer.engine.info.accepts_images else None
        result = self.answerer.answer(item.question, lines, image=image)
        return {
            "prediction": result.answer,
            "free": result.free,
            "ocr_lines": lines,
            "candidates": result.candidates,
            "timings": {**result.timings, "total_s": time.perf_counter() - started},
        }


def build_runner(
    settings: Settings, *, mode: str, lines: dict[str, list[str]], root: Path
) -> STVQARunner:
    """A runner with its own answerer, over the lines OCR read before the question loop: what
    this process, or each Ray worker, builds."""
    from mmrag.core.components import build_engine, minilm_embed
    from mmrag.generation.scene_text import SceneTextAnswerer

    embed = minilm_embed() if mode == "similarity" else None
    return STVQARunner(
        SceneTextAnswerer(build_engine(settings), mode=mode, embed=embed), lines, root
    )


def read_images(
    items: Sequence[STVQAItem], root: Path, args: argparse.Namespace, settings
) -> dict[str, list[str]]:
    """The kept OCR lines of every distinct image, read in parallel through the cache."""
    from tqdm import tqdm

    from mmrag.indexes.ocr.batch import OcrRunStats, ocr_images
    from mmrag.indexes.ocr.cache import OcrCache
    from mmrag.indexes.ocr.reader import keep, reader_identity

    paths = sorted({item.image for item in items})
    path = args.ocr_cache or sibling(args.out, ".ocr.jsonl")
    cache = OcrCache(path, reader_identity(settings.ocr_models))
    results = ocr_images(
        paths,
        lambda ref: (root / ref).read_bytes(),
        cache,
        models=settings.ocr_models,
        workers=args.ocr_workers,
        max_pixels=settings.max_image_pixels,
        stats=OcrRunStats(),
    )
    bar = tqdm(results, total=len(paths), desc="ocr", unit=" images", disable=None)
    return {
        ref: [line.text for line in keep(lines or [], settings.ocr_min_confidence)]
        for ref, lines in bar
    }


@dataclass
class STVQARunInfo:
    out: Path
    run: dict[str, Any]
    items: list[STVQAItem]
    records: dict[str, dict[str, Any]]
    ran_now: int
    skipped: list[Path]
    seconds: float
    answered_by: str = "this process"


def _comparability(info: STVQARunInfo) -> str:
    return (
        "> **Not comparable with the published number** unless these are the questions of the "
        "official ST-VQA task-3 test set, scored by the challenge server (its answers are not "
        f"public). This run answered {len(info.items)} questions of "
        f"`{Path(info.run['data']).name}`"
        + (f", leaving out {len(info.skipped)} whose image was missing" if info.skipped else "")
        + ". The published figure is shown for orientation only."
    )


def _run_table(info: STVQARunInfo) -> str:
    run = info.run
    engine = run["engine"] + (f" ({run['model']})" if run.get("model") else " (embedded model)")
    rows = [
        ("data / images", f"{run['data']} / {run['images']}"),
        (
            "OCR",
            f"PP-OCR (rapidocr-onnxruntime), lines of confidence >= {run['ocr_min_confidence']}",
        ),
        ("answer", f"{run['answer']} ({engine}, temperature 0)"),
        (
            "questions",
            f"{len(info.items)} ({info.ran_now} answered in this run, "
            f"{len(info.items) - info.ran_now} resumed)",
        ),
        ("skipped (image missing)", len(info.skipped)),
        ("wall time", f"{info.seconds:.1f} s (this process, OCR and model loading included)"),
        ("answered by", info.answered_by),
    ]
    return table(["", ""], rows)


def _scores(info: STVQARunInfo, metrics: dict[str, float] | None) -> str:
    if metrics is None:
        return "Not scored: the data has no answers (test set?); submit the prediction file."
    rows = [
        [
            "ANLS",
            number(metrics["anls"]),
            "; ".join(f"{b.system} {b.value:g} ({b.setting})" for b in PUBLISHED),
        ],
        ["accuracy (exact match)", number(metrics["accuracy"]), "-"],
    ]
    return (
        "ANLS (tau 0.5) and exact-match accuracy, means over questions with answers, by "
        "`evaluation.scoring.stvqa` (the code `mmrag eval score stvqa` uses).\n\n"
        + table(["metric", "ours", "published"], rows)
    )


def _counts(info: STVQARunInfo) -> str:
    from mmrag.generation.scene_text import candidates

    records = [info.records[item.question_id] for item in info.items]
    no_text = sum(not record["ocr_lines"] for record in records)
    empty = sum(not record["prediction"].strip() for record in records)
    in_text = sum(
        bool(record["prediction"])
        and record["prediction"].lower() in " ".join(record["ocr_lines"]).lower()
        for record in records
    )
    reachable = [  # the choosers' ceiling: the best span OCR offered
        max(
            (anls_score(span, item.answers) for span in candidates(record["ocr_lines"])),
            default=0.0,
        )
        for item, record in zip(info.items, records, strict=True)
        if item.answers
    ]
    rows = [
        ("questions whose image had no text read", no_text),
        ("empty answers", empty),
        ("answers copied from the text read", in_text),
    ]
    if reachable:
        rows.append(
            (
                "ANLS if the best OCR candidate were always chosen",
                number(sum(reachable) / len(reachable)),
            )
        )
    return table(["", "count"], rows)


def write_chart(info: STVQARunInfo, metrics: dict[str, float]) -> Path:
    path = sibling(info.out, ".anls.png")
    bars = [Bar("ANLS", 100 * metrics["anls"]), Bar("accuracy", 100 * metrics["accuracy"])]
    references = [
        Reference(100 * b.value, f"published: {b.label}", "published", (0, 0)) for b in PUBLISHED
    ]
    bar_chart(
        path,
        bars,
        title=f"ST-VQA: mmrag ({info.run['answer']}), {len(info.items)} questions\n"
        "published VTA (dashed) is task 3's test set: orientation only",
        ylabel="score (x100)",
        references=references,
    )
    return path


def write_stvqa_report(
    info: STVQARunInfo, metrics: dict[str, float] | None, warnings: list[str]
) -> Path:
    sections = [
        "# mmrag eval run stvqa",
        _comparability(info),
        "## Run",
        _run_table(info),
        "## Scores",
        _scores(info, metrics),
        "## Counts",
        _counts(info),
        "## Mean time per question",
        timing_table([info.records[i.question_id].get("timings") or {} for i in info.items]),
    ]
    if metrics is not None:
        sections += ["## Chart", f"![ANLS and accuracy]({write_chart(info, metrics).name})"]
    if info.skipped:
        sections += ["## Skipped: image missing", "\n".join(f"- `{p}`" for p in info.skipped[:20])]
    if warnings:
        sections += ["## Scoring notes", "\n".join(f"- {w}" for w in warnings)]
    report = sibling(info.out, ".report.md")
    atomic_write_text(report, "\n\n".join(sections) + "\n")
    return report


def add_parser(benches: argparse._SubParsersAction) -> None:
    stvqa = benches.add_parser(
        "stvqa",
        help="ST-VQA: OCR the image, answer in a few words; ANLS and accuracy",
        description='Writes [{"question_id": ..., "answer": "..."}] (the ST-VQA submission).',
    )
    stvqa.add_argument(
        "--data", type=Path, required=True, help="ST-VQA release JSON ({data: [...]})"
    )
    stvqa.add_argument(
        "--images", type=Path, required=True, help="root the file_path fields are relative to"
    )
    add_run_options(stvqa)
    stvqa.add_argument(
        "--skip-missing", action="store_true", help="leave out questions whose image is missing"
    )
    stvqa.add_argument(
        "--answer",
        choices=ANSWER_MODES,
        default=DEFAULT_MODE,
        help="free: the model writes the answer; likelihood: the OCR span the model likeliest "
        "opens with; similarity: the free answer snapped to the nearest OCR span "
        "(default %(default)s, the best measured)",
    )
    stvqa.add_argument(
        "--ocr-workers",
        type=int,
        default=os.cpu_count() or 1,
        help="OCR processes (default: one per core)",
    )
    stvqa.add_argument(
        "--ocr-cache",
        type=Path,
        help="lines read per image, shared by runs over the same images (default OUT.ocr.jsonl)",
    )
    for name in ("ocr_min_confidence", "ocr_det_model", "ocr_rec_model", "max_image_pixels"):
        setting_flag(stvqa, name)
    add_config_option(stvqa)
    setting_flag(stvqa, "device")
    add_generation_options(stvqa)
    stvqa.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    check_run_options(args)
    if args.ocr_workers < 1:
        raise EvaluationError(f"--ocr-workers must be at least 1, got {args.ocr_workers}")
    if not args.images.is_dir():
        raise EvaluationError(f"--images {args.images}: no such directory")
    items = loader.load_gold(args.data)[: args.limit]
    missing = [path for item in items if not (path := image_path(item, args.images)).is_file()]
    if missing and not args.skip_missing:
        raise EvaluationError(
            f"{missing[0]}: no such image ({len(missing)} of {len(items)} images missing); "
            "check --images, or pass --skip-missing to leave them out"
        )
    skipped = set(missing)
    items = [item for item in items if image_path(item, args.images) not in skipped]
    if not items:
        raise EvaluationError(f"no question of {args.data} has its image under {args.images}")
    settings = settings_from(args)
    settings.ocr_models.check()
    description = {
        "bench": "stvqa",
        "data": str(args.data.resolve()),
        "images": str(args.images.resolve()),
        "answer": args.answer,
        **settings.model_dump(
            mode="json",
            include={
                "engine",
                "model",
                "engine_url",
                "max_tokens",
                "ocr_min_confidence",
                "ocr_det_model",
                "ocr_rec_model",
            },
        ),
    }
    checkpoint = Checkpoint.open(args.out, description, resume=args.resume)
    lines = read_images(
        [i for i in items if i.question_id not in checkpoint.records], args.images, args, settings
    )
    remote = partial(build_runner, mode=args.answer, lines=lines, root=args.images)
    with Answering(args, settings, remote) as answering:
        ran = answering.run(items, lambda i: i.question_id, checkpoint, desc="stvqa")
    submission = [
        {
            "question_id": submission_id(item.question_id),
            "answer": checkpoint.records[item.question_id]["prediction"],
        }
        for item in items
    ]
    checkpoint.finish(args.out, json.dumps(submission, indent=2, ensure_ascii=False) + "\n")

    metrics, warnings = None, []
    if any(item.answers for item in items):
        report = scoring.score(
            items,
            loader.load_predictions(args.out),
            gold_label=str(args.data),
            pred_label=str(args.out),
        )
        metrics, warnings = report.metrics, report.warnings
    print_warnings(warnings)
    info = STVQARunInfo(
        out=args.out,
        run=checkpoint.run,
        items=items,
        records=checkpoint.records,
        ran_now=ran,
        skipped=sorted(skipped),
        seconds=time.perf_counter() - started,
        answered_by=answering.describe(),
    )
    report_path = write_stvqa_report(info, metrics, warnings)
    scored = (
        "not scored (no answers)"
        if metrics is None
        else f"ANLS {number(metrics['anls'])}, accuracy {number(metrics['accuracy'])}"
    )
    print(
        f"stvqa: {len(items)} questions ({ran} answered, {len(items) - ran} resumed, "
        f"{len(skipped)} skipped for missing images) in {info.seconds:.1f} s; {scored}; "
        f"wrote {args.out}, {report_path}"
    )
    return 0
