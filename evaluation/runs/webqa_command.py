"""`mmrag eval run webqa`: the steps in order, each refusable input checked before models load.

1. questions of the split (`--limit`), the partial file (`--resume`), `--images`;
2. the FL model (if asked for) and the pipeline, built once;
3. the question loop, each answer appended to the partial file;
4. the submission written atomically, read back and scored as `eval score` would;
5. the report and charts, and one summary line on stdout.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from mmrag.core.options import settings_from
from mmrag.evaluation.loaders import webqa as loader
from mmrag.evaluation.runs import webqa
from mmrag.evaluation.runs.checkpoint import Checkpoint, sibling
from mmrag.evaluation.runs.command import check_file, check_limit, print_warnings
from mmrag.evaluation.runs.loop import run_items
from mmrag.evaluation.runs.markdown import percent
from mmrag.evaluation.runs.webqa_report import FL_MISSING, WebQARunInfo, write_webqa_report
from mmrag.evaluation.runs.webqa_scores import score_run


def images_note(images: Path | None, collection: Any) -> str:
    """The index reads images through its own store; say which, and what --images was."""
    configured = (collection.manifest.get("images") or {}).get("path")
    own = f"`{(collection.root / configured).resolve()}`" if configured else "none"
    if images is None:
        return f"--images not given; the index's own image store: {own}"
    return f"--images `{images}` given and found; the index reads its own image store: {own}"


def run(args: argparse.Namespace) -> int:
    from mmrag.core.components import build_pipeline

    started = time.perf_counter()
    check_limit(args.limit)
    check_file("--images", args.images)
    restricted = args.setting == "restricted"
    questions = loader.load_gold_files(args.data, args.split, with_negatives=restricted)
    questions = questions[: args.limit]
    settings = settings_from(args).model_copy(update={"index": args.index})
    description = {
        "bench": "webqa",
        "setting": args.setting,
        "split": args.split,
        "data": [str(path.resolve()) for path in args.data],
        "index": str(args.index.resolve()),
        "k": args.k,
        **webqa.pipeline_description(settings),
    }
    checkpoint = Checkpoint.open(args.out, description, resume=args.resume)
    fl = None
    if args.fl_model:
        from mmrag.evaluation.metrics.fluency import BartLogLikelihood

        fl = BartLogLikelihood(args.fl_model, batch_size=args.fl_batch_size, device=args.device)
    pipeline = build_pipeline(settings)
    if restricted:
        webqa.check_facts_indexed(questions, pipeline)
    runner = webqa.WebQARunner(pipeline, args.setting, k=args.k)
    desc = f"webqa {args.setting} {args.split}"
    ran = run_items(questions, lambda q: q.guid, runner, checkpoint, desc=desc)
    text = json.dumps(webqa.submission(questions, checkpoint.records), indent=2) + "\n"
    checkpoint.finish(args.out, text)

    predictions = loader.load_predictions(args.out)
    scores = score_run(questions, predictions, fl=fl, pred_label=str(args.out))
    print_warnings(scores.overall.warnings)
    collection = pipeline.retriever.collection
    info = WebQARunInfo(
        out=args.out,
        run=checkpoint.run,
        questions=questions,
        records=checkpoint.records,
        ran_now=ran,
        resumed=len(questions) - ran,
        seconds=time.perf_counter() - started,
        index_sources={m: len(r) for m, r in collection.store.rows_by_modality.items()},
        images_note=images_note(args.images, collection),
        fl_note=f"BART model `{args.fl_model}`" if fl else FL_MISSING,
        retrievers=pipeline.retriever.retrievers,
        fusion=pipeline.retriever.fusion,
        threshold=pipeline.selector.threshold,
    )
    report = write_webqa_report(info, scores)
    metrics = scores.overall.metrics
    errors = sum(checkpoint.records[q.guid].get("generation_error") is not None for q in questions)
    print(
        f"webqa {args.setting} {args.split}: {len(questions)} questions ({ran} answered, "
        f"{info.resumed} resumed, {errors} generation errors) in {info.seconds:.1f} s; "
        f"retrieval F1 {percent(metrics['retrieval_f1'])}, Acc {percent(metrics['acc'])}, "
        f"FL {percent(metrics['fl'])}, FL×Acc {percent(metrics['fl_x_acc'])}; "
        f"wrote {args.out}, {report}, {sibling(args.out, '.*.png')}"
    )
    return 0
