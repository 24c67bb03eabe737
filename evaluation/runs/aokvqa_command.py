"""`mmrag eval run aokvqa`: the steps in order, each refusable input checked before models load.

1. items (`--limit`), their COCO images (missing: an error, or left out with --skip-missing),
   captions, the partial file (`--resume`);
2. the engine, the MiniLM embedder (for `--choose similarity`) and the optional retriever;
3. the question loop, each prediction appended to the partial file;
4. the prediction file written atomically, read back and scored as `eval score aokvqa` would;
5. the report and chart, and one summary line on stdout.
"""

from __future__ import annotations

import argparse
import json
import time

from mmrag.core.options import settings_from
from mmrag.evaluation.errors import EvaluationError
from mmrag.evaluation.loaders import aokvqa as loader
from mmrag.evaluation.runs import aokvqa
from mmrag.evaluation.runs.aokvqa_report import AOKVQARunInfo, write_aokvqa_report
from mmrag.evaluation.runs.checkpoint import Checkpoint
from mmrag.evaluation.runs.command import check_file, check_limit, print_warnings
from mmrag.evaluation.runs.loop import run_items
from mmrag.evaluation.runs.markdown import number
from mmrag.evaluation.scoring import aokvqa as scoring


def run(args: argparse.Namespace) -> int:
    from mmrag.core.components import build_engine, build_retriever
    from mmrag.generation.rationale import RationaleWriter

    started = time.perf_counter()
    check_limit(args.limit)
    check_file("--captions", args.captions)
    items = loader.load_gold(args.data)[: args.limit]
    split = args.split or items[0].split or "val"
    missing = aokvqa.missing_images(items, args.coco_dir, split)
    if missing and not args.skip_missing:
        raise EvaluationError(
            f"{missing[0]}: no such image ({len(missing)} of {len(items)} images missing); "
            "check --coco-dir and --split, or pass --skip-missing to leave them out"
        )
    skipped = set(missing)
    items = [i for i in items if aokvqa.image_path(i, args.coco_dir, split) not in skipped]
    if not items:
        raise EvaluationError(f"no question of {args.data} has its image under {args.coco_dir}")
    captions = aokvqa.load_captions(args.captions)
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

    embed = None
    if args.choose == "similarity":
        from mmrag.indexes.encoders.loading import text_encoder
        from mmrag.indexes.encoders.text import DEFAULT_TEXT_EMBEDDER

        embed = text_encoder(DEFAULT_TEXT_EMBEDDER, device=settings.device).encode_texts
    runner = aokvqa.AOKVQARunner(
        RationaleWriter(build_engine(settings), choose=args.choose, embed=embed),
        coco_dir=args.coco_dir,
        split=split,
        captions=captions,
        retriever=build_retriever(settings) if args.index is not None else None,
        knowledge=args.knowledge,
    )
    ran = run_items(items, lambda i: i.question_id, runner, checkpoint, desc=f"aokvqa {split}")
    text = json.dumps(aokvqa.predictions(items, checkpoint.records), indent=2) + "\n"
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
