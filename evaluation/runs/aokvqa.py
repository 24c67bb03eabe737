"""`mmrag eval run aokvqa`: A-OKVQA through the rationale writer, scored and reported.

Each item's COCO image goes to engines that see images; text-only engines get the caption from
`--captions` instead. Knowledge retrieved from an index is optional context, as in `mmrag
rationale`. The multiple-choice answer is always one of the item's choices, since the official
metric scores anything else 0 and a blank would hide how often the chooser had no preference.

Steps, each refusable input checked before models load: items (`--limit`), their COCO images
(missing: an error, or left out with `--skip-missing`), captions, the partial file
(`--resume`); the engine, the MiniLM embedder (for `--choose similarity`) and the optional
retriever; the question loop; the prediction file written atomically, read back and scored as
`eval score aokvqa` would; the report (`OUT.report.md`, `OUT.accuracy.png`, MC and DA beside
GPV-2). The published numbers are for the whole val or test split; a `--limit`ed run, a run
with skipped images or on a small fixture is not comparable, and the report says so.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmrag.core.options import (
    add_config_option,
    add_generation_options,
    add_retrieval_options,
    settings_from,
)
from mmrag.evaluation.errors import DatasetError, EvaluationError
from mmrag.evaluation.io import as_id, read_json
from mmrag.evaluation.loaders import aokvqa as loader
from mmrag.evaluation.loaders.aokvqa import AOKVQAItem
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
    Bar,
    Reference,
    aokvqa_baselines,
    bar_chart,
    number,
    table,
    timing_table,
)
from mmrag.evaluation.scoring import aokvqa as scoring
from mmrag.generation.rationale import CHOOSERS
from mmrag.indexes.atomic import atomic_write_text
from mmrag.indexes.errors import InputError
from mmrag.indexes.images import decode_image

if TYPE_CHECKING:  # models load only when a run starts; `mmrag --help` stays instant
    from mmrag.core.settings import Settings
    from mmrag.generation.rationale import RationaleWriter
    from mmrag.retrieval.hybrid import HybridRetriever


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


def image_path(item: AOKVQAItem, coco_dir: Path, split: str) -> Path:
    return item.image_path(coco_dir, split)


def missing_images(items: Sequence[AOKVQAItem], coco_dir: Path, split: str) -> list[Path]:
    return [path for item in items if not (path := image_path(item, coco_dir, split)).is_file()]


class AOKVQARunner:
    """Rationale, direct answer and multiple choice for one item; what the checkpoint stores."""

    def __init__(
        self,
        writer: RationaleWriter,
        *,
        coco_dir: Path,
        split: str,
        captions: dict[str, str],
        retriever: HybridRetriever | None = None,
        knowledge: int = 2,
    ) -> None:
        self.writer = writer
        self.coco_dir = coco_dir
        self.split = split
        self.captions = captions
        self.retriever = retriever
        self.knowledge = knowledge

    def _image(self, item: AOKVQAItem) -> bytes:
        path = image_path(item, self.coco_dir, self.split)
        try:
            data = path.read_bytes()
            decode_image(data)
        except FileNotFoundError:
            raise EvaluationError(f"{path}: no such image (question {item.question_id})") from None
        except InputError as exc:
            raise EvaluationError(f"{path}: {exc} (question {item.question_id})") from None
        return data

    def __call__(self, item: AOKVQAItem) -> dict[str, Any]:
        started = time.perf_counter()
        image = self._image(item)
        knowledge = []
        if self.retriever is not None:
            candidates = self.retriever.search(item.question, self.knowledge)
            knowledge = [candidate.source for candidate in candidates]
        retrieved = time.perf_counter() - started
        result = self.writer.answer(
            item.question,
            image=image,
            caption=self.captions.get(as_id(item.image_id)),
            choices=list(item.choices) or None,
            knowledge=knowledge,
        )
        choice = result.multiple_choice
        fallback = bool(item.choices) and choice is None
        if fallback:
            choice = item.choices[0]
        return {
            "prediction": {
                "multiple_choice": choice,
                "direct_answer": result.direct_answer,
                "rationale": result.rationale,
            },
            "timings": {
                "image_and_knowledge_s": retrieved,
                **result.timings,
                "total_s": time.perf_counter() - started,
            },
            "choice_fallback": fallback,
        }


def build_runner(
    settings: Settings,
    *,
    choose: str,
    coco_dir: Path,
    split: str,
    captions: dict[str, str],
    knowledge: int,
    retrieve: bool,
) -> AOKVQARunner:
    """A runner with its own writer (and retriever, with `--index`): what this process, or
    each Ray worker, builds."""
    from mmrag.core.components import build_engine, build_retriever
    from mmrag.generation.rationale import RationaleWriter

    embed = None
    if choose == "similarity":
        from mmrag.indexes.encoders.loading import text_encoder
        from mmrag.indexes.encoders.text import DEFAULT_TEXT_EMBEDDER

        embed = text_encoder(DEFAULT_TEXT_EMBEDDER, device=settings.device).encode_texts
    return AOKVQARunner(
        RationaleWriter(build_engine(settings), choose=choose, embed=embed),
        coco_dir=coco_dir,
        split=split,
        captions=captions,
        retriever=build_retriever(settings) if retrieve else None,
        knowledge=knowledge,
    )


def predictions(
    items: Sequence[AOKVQAItem], records: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """`{question_id: {"multiple_choice", "direct_answer", "rationale"}}` in file order."""
    return {item.question_id: records[item.question_id]["prediction"] for item in items}


LABELS = {"mc": "MC accuracy", "da": "DA accuracy", "bleu": "rationale BLEU", "meteor": "METEOR"}


@dataclass
class AOKVQARunInfo:
    out: Path
    run: dict[str, Any]
    items: list[AOKVQAItem]  # the items answered (skipped ones excluded)
    records: dict[str, dict[str, Any]]
    ran_now: int
    resumed: int
    skipped: list[Path]  # images missing under --skip-missing
    seconds: float
    answered_by: str = "this process"


def _fmt(metric: str, value: float | None) -> str:
    """MC/DA/BLEU are 0..100 as published, METEOR 0..1."""
    return number(value, 3 if metric == "meteor" else 2)


def _run_table(info: AOKVQARunInfo) -> str:
    run = info.run
    engine = run["engine"] + (f" ({run['model']})" if run.get("model") else " (embedded model)")
    knowledge = (
        f"{run['knowledge']} sources per question from {run['index']}"
        if run.get("index")
        else "none"
    )
    rows = [
        ("data", run["data"]),
        ("split / images", f"{run['split']} / {run['coco_dir']}/{run['split']}2017"),
        ("captions", run.get("captions") or "none (engines without vision see no image)"),
        ("knowledge", knowledge),
        ("generator", f"{engine}, temperature 0"),
        ("multiple choice", f"by {run['choose']}"),
        (
            "questions",
            f"{len(info.items)} ({info.ran_now} answered in this run, {info.resumed} resumed)",
        ),
        ("skipped (image missing)", len(info.skipped)),
        ("wall time", f"{info.seconds:.1f} s (this process, models loading included)"),
        ("answered by", info.answered_by),
    ]
    return table(["", ""], rows)


def _scores(info: AOKVQARunInfo, metrics: dict[str, float | None] | None) -> str:
    if metrics is None:
        return (
            f"Not scored: split {info.run['split']} has no answers in its release file; "
            "submit the prediction file to the A-OKVQA leaderboard."
        )
    published = aokvqa_baselines(info.run["split"])
    rows = []
    for metric, label in LABELS.items():
        reference = "; ".join(f"{b.system} {b.value:g}" for b in published if b.metric == metric)
        rows.append([label, _fmt(metric, metrics.get(metric)), reference or "-"])
    scores = table(["metric", "ours", f"published ({info.run['split']} split)"], rows)
    return (
        "MC and DA as the official script scores them (x100; DA leaves out questions marked "
        "`difficult_direct_answer`); rationales by SacreBLEU and METEOR against the three "
        "references (`evaluation.scoring.aokvqa`, the code `mmrag eval score aokvqa` uses).\n\n"
        + scores
    )


def _counts(info: AOKVQARunInfo) -> str:
    difficult = sum(item.difficult_direct_answer for item in info.items)
    fallbacks = sum(bool(info.records[i.question_id].get("choice_fallback")) for i in info.items)
    rows = [
        ("questions scored for MC", len(info.items)),
        ("questions scored for DA (not difficult)", len(info.items) - difficult),
        ("MC answers where the chooser had no preference (first choice given)", fallbacks),
    ]
    return table(["", "count"], rows)


def _timings(info: AOKVQARunInfo) -> str:
    return timing_table([info.records[i.question_id].get("timings") or {} for i in info.items])


def write_chart(info: AOKVQARunInfo, metrics: dict[str, float | None]) -> Path:
    path = sibling(info.out, ".accuracy.png")
    split = info.run["split"]
    bars = [Bar("MC", metrics.get("mc")), Bar("DA", metrics.get("da"))]
    references = [
        Reference(b.value, f"published {metric.upper()}: {b.label}", "published", (index, index))
        for index, metric in enumerate(("mc", "da"))
        for b in aokvqa_baselines(split)
        if b.metric == metric and b.system == "GPV-2"
    ]
    bar_chart(
        path,
        bars,
        title=f"A-OKVQA accuracy: mmrag, {split} ({len(info.items)} questions)\n"
        "published GPV-2 (dashed) is on the whole split: orientation only",
        ylabel="accuracy (%)",
        references=references,
    )
    return path


def _comparability(info: AOKVQARunInfo) -> str:
    return (
        f"> **Not comparable with the published numbers** unless this run covers the whole "
        f"A-OKVQA {info.run['split']} split: it answered {len(info.items)} questions of "
        f"`{Path(info.run['data']).name}`"
        + (f", skipping {len(info.skipped)} whose image was missing" if info.skipped else "")
        + ". Baselines are shown for orientation only, labelled with their split."
    )


def write_aokvqa_report(
    info: AOKVQARunInfo, metrics: dict[str, float | None] | None, warnings: list[str]
) -> Path:
    sections = [
        f"# mmrag eval run aokvqa: split {info.run['split']}",
        _comparability(info),
        "## Run",
        _run_table(info),
        "## Scores",
        _scores(info, metrics),
        "## Counts",
        _counts(info),
        "## Mean time per question",
        _timings(info),
    ]
    if metrics is not None:
        chart = write_chart(info, metrics)
        sections += ["## Chart", f"![MC and DA accuracy]({chart.name})"]
    if info.skipped:
        listed = "\n".join(f"- `{path}`" for path in info.skipped[:20])
        more = f"\n- ... and {len(info.skipped) - 20} more" if len(info.skipped) > 20 else ""
        sections += ["## Skipped: image missing", listed + more]
    if warnings:
        sections += ["## Scoring notes", "\n".join(f"- {w}" for w in warnings)]
    report = sibling(info.out, ".report.md")
    atomic_write_text(report, "\n\n".join(sections) + "\n")
    return report


def add_parser(benches: argparse._SubParsersAction) -> None:
    aokvqa = benches.add_parser(
        "aokvqa",
        help="A-OKVQA: rationale, direct answer, multiple choice; MC, DA, BLEU, METEOR",
        description="Writes {question_id: {multiple_choice, direct_answer, rationale}}.",
    )
    aokvqa.add_argument("--data", type=Path, required=True, help="aokvqa_v1p0_{split}.json")
    aokvqa.add_argument("--coco-dir", type=Path, required=True, help="holds {split}2017/*.jpg")
    aokvqa.add_argument("--split", help="COCO split (default: from the file name, else val)")
    add_run_options(aokvqa)
    aokvqa.add_argument(
        "--skip-missing", action="store_true", help="skip questions whose image is missing"
    )
    aokvqa.add_argument(
        "--captions", type=Path, help="JSON {image_id: caption} for engines without vision"
    )
    aokvqa.add_argument("--index", type=Path, help="retrieve knowledge from this index")
    aokvqa.add_argument("--knowledge", type=int, default=2, help="sources from --index")
    aokvqa.add_argument("--choose", choices=CHOOSERS, default="similarity")
    add_config_option(aokvqa)
    add_retrieval_options(aokvqa)
    add_generation_options(aokvqa)
    aokvqa.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    check_run_options(args)
    check_file("--captions", args.captions)
    items = loader.load_gold(args.data)[: args.limit]
    split = args.split or items[0].split or "val"
    missing = missing_images(items, args.coco_dir, split)
    if missing and not args.skip_missing:
        raise EvaluationError(
            f"{missing[0]}: no such image ({len(missing)} of {len(items)} images missing); "
            "check --coco-dir and --split, or pass --skip-missing to leave them out"
        )
    skipped = set(missing)
    items = [i for i in items if image_path(i, args.coco_dir, split) not in skipped]
    if not items:
        raise EvaluationError(f"no question of {args.data} has its image under {args.coco_dir}")
    captions = load_captions(args.captions)
    settings = settings_from(args)
    if args.index is not None:
        settings = settings.model_copy(update={"index": args.index})
    description = {
        "bench": "aokvqa",
        "split": split,
        "data": str(args.data.resolve()),
        "coco_dir": str(args.coco_dir.resolve()),
        "captions": str(args.captions.resolve()) if args.captions else None,
        "index": str(args.index.resolve()) if args.index else None,
        "knowledge": args.knowledge,
        "choose": args.choose,
        **settings.model_dump(
            mode="json",
            include={"engine", "model", "engine_url", "retrievers", "fusion"},
        ),
    }
    checkpoint = Checkpoint.open(args.out, description, resume=args.resume)

    remote = partial(
        build_runner,
        choose=args.choose,
        coco_dir=args.coco_dir,
        split=split,
        captions=captions,
        knowledge=args.knowledge,
        retrieve=args.index is not None,
    )
    with Answering(args, settings, remote) as answering:
        ran = answering.run(items, lambda i: i.question_id, checkpoint, desc=f"aokvqa {split}")
    text = json.dumps(predictions(items, checkpoint.records), indent=2) + "\n"
    checkpoint.finish(args.out, text)

    metrics, warnings = None, []
    if all(item.correct_choice_idx is not None for item in items):
        report = scoring.score(
            items,
            loader.load_predictions(args.out),
            gold_label=str(args.data),
            pred_label=str(args.out),
        )
        metrics, warnings = report.metrics, report.warnings
    print_warnings(warnings)
    info = AOKVQARunInfo(
        out=args.out,
        run=checkpoint.run,
        items=items,
        records=checkpoint.records,
        ran_now=ran,
        resumed=len(items) - ran,
        skipped=sorted(skipped),
        seconds=time.perf_counter() - started,
        answered_by=answering.describe(),
    )
    report_path = write_aokvqa_report(info, metrics, warnings)
    scored = (
        "not scored (no answers in this split)"
        if metrics is None
        else f"MC {number(metrics['mc'], 2)}, DA {number(metrics['da'], 2)}, "
        f"BLEU {number(metrics['bleu'], 2)}, METEOR {number(metrics['meteor'], 3)}"
    )
    print(
        f"aokvqa {split}: {len(items)} questions ({ran} answered, {info.resumed} resumed, "
        f"{len(skipped)} skipped for missing images) in {info.seconds:.1f} s; {scored}; "
        f"wrote {args.out}, {report_path}"
    )
    return 0
