"""`mmrag index build|stats`: turn a corpus into a persistent index, and describe one."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from mmrag.core.options import setting_flag
from mmrag.indexes.corpus.reader import DUPLICATE_POLICIES
from mmrag.indexes.encoders.text import DEFAULT_TEXT_EMBEDDER
from mmrag.indexes.executor import EXECUTORS, RAY_BATCH_SIZE


def register(commands: argparse._SubParsersAction) -> None:
    index = commands.add_parser("index", help="build and inspect indexes")
    actions = index.add_subparsers(dest="action", metavar="ACTION", required=True)

    build = actions.add_parser("build", help="index a WebQA JSON or JSONL corpus")
    build.add_argument(
        "--corpus",
        type=Path,
        action="append",
        required=True,
        help="WebQA_*.json or .jsonl file (repeat for several)",
    )
    build.add_argument("--images", type=Path, help="WebQA imgs.tsv (imgs.lineidx beside it)")
    build.add_argument(
        "--out",
        type=Path,
        required=True,
        help="index directory to write; an existing index there is replaced atomically",
    )
    build.add_argument(
        "--force",
        action="store_true",
        help="replace --out even if it is not an mmrag index (a file, or a folder of files)",
    )
    build.add_argument(
        "--on-duplicate",
        choices=DUPLICATE_POLICIES,
        default="error",
        help="a source id given again with other content: an error naming both (the "
        "default), or keep the first; the same id with the same content is always skipped",
    )
    build.add_argument("--k1", type=float, default=1.5)
    build.add_argument("--b", type=float, default=0.75)
    build.add_argument(
        "--method",
        default="lucene",
        choices=["lucene", "robertson", "atire", "bm25l", "bm25+"],
        help="BM25 variant (bm25s naming)",
    )
    build.add_argument(
        "--text-embedder",
        default=DEFAULT_TEXT_EMBEDDER,
        help="sentence-transformers name or path for caption/snippet vectors "
        "(default: the packaged all-MiniLM-L6-v2); 'none' for BM25 only",
    )
    build.add_argument("--clip", help="CLIP/SigLIP hub name or path for image vectors")
    build.add_argument(
        "--clip-backend", choices=["transformers", "open_clip"], default="transformers"
    )
    build.add_argument(
        "--no-clip",
        action="store_true",
        help="no image vectors (the default): images are reached through their captions",
    )
    build.add_argument(
        "--dense-index",
        default="auto",
        help="faiss factory string, or auto (Flat up to 100K vectors, else tuned IVF)",
    )
    build.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: cuda when present)")
    ocr = build.add_argument_group("scene text (OCR)")
    ocr.add_argument(
        "--ocr",
        action="store_true",
        help="read the text in every image with PP-OCR (rapidocr-onnxruntime) and index it: "
        "about 1 s per photo and core",
    )
    setting_flag(ocr, "ocr_min_confidence")
    setting_flag(ocr, "ocr_det_model")
    setting_flag(ocr, "ocr_rec_model")
    ocr.add_argument(
        "--ocr-workers",
        type=int,
        default=os.cpu_count() or 1,
        help="processes reading images in parallel (default: one per core, %(default)s here)",
    )
    ocr.add_argument(
        "--ocr-cache",
        type=Path,
        help="file of the lines read so far, so a killed build resumes without reading those "
        "images again (default: OUT.ocr-cache.jsonl beside --out)",
    )
    scale = build.add_argument_group("scaling out (Ray)")
    scale.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="local",
        help="where text vectors, CLIP vectors and OCR are computed: this process, or Ray Data "
        "actor pools on a Ray cluster (pip install 'mmrag[ray]'); the index is the same",
    )
    scale.add_argument(
        "--ray-address",
        help="HOST:PORT of a running cluster's head (`ray start --head`); default: a Ray "
        "instance on this machine. Every node must see the corpus and images at the same path",
    )
    scale.add_argument(
        "--ray-concurrency",
        type=int,
        help="actors (one model each) per map (default: one per GPU, or per CPU without GPUs)",
    )
    scale.add_argument(
        "--ray-batch-size",
        type=int,
        default=RAY_BATCH_SIZE,
        help="sources per Ray batch, the unit a stopped build resumes from (default: %(default)s)",
    )
    build.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar (it is also off when stderr is not a terminal)",
    )
    build.set_defaults(run=run_build)

    stats = actions.add_parser("stats", help="describe an index")
    stats.add_argument("--index", type=Path, required=True)
    stats.add_argument(
        "--verify",
        action="store_true",
        help="kept for scripts: every load now checks every file's checksum",
    )
    stats.set_defaults(run=run_stats)


def run_build(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from mmrag.core.options import settings_from
    from mmrag.indexes.bm25 import BM25Params
    from mmrag.indexes.collection import build_index, check_build_inputs
    from mmrag.indexes.encoders.loading import clip_encoder, text_encoder
    from mmrag.indexes.errors import InputError
    from mmrag.indexes.ocr.build import OcrOptions, default_cache
    from mmrag.indexes.ray_executor import RayExecutor, default_work_folder

    if args.clip and args.no_clip:
        raise InputError("--clip and --no-clip contradict each other")
    if args.ocr_workers < 1:
        raise InputError(f"--ocr-workers must be at least 1, got {args.ocr_workers}")
    check_build_inputs(args.corpus, args.out, args.images, force=args.force)
    ocr = None
    if args.ocr:
        settings = settings_from(args)
        settings.ocr_models.check()
        ocr = OcrOptions(
            models=settings.ocr_models,
            min_confidence=settings.ocr_min_confidence,
            workers=args.ocr_workers,
            cache=args.ocr_cache or default_cache(Path(args.out)),
        )
    bar = {"file": sys.stderr, "disable": True if args.quiet else None}

    def progress(sources):
        return tqdm(sources, desc="indexing", unit=" sources", **bar)

    def encode_progress(items, label, total):
        return tqdm(items, desc=label, total=total, unit=" batches", **bar)

    def ocr_progress(items, label, total):
        return tqdm(items, desc=label, total=total, unit=" images", **bar)

    def build(executor, embedder, clip):
        return build_index(
            args.corpus,
            args.out,
            images=args.images,
            bm25=BM25Params(k1=args.k1, b=args.b, method=args.method),
            text_embedder=embedder,
            clip=clip,
            dense_factory=args.dense_index,
            progress=progress,
            encode_progress=encode_progress,
            ocr=ocr,
            ocr_progress=ocr_progress,
            force=args.force,
            executor=executor,
            on_duplicate=args.on_duplicate,
        )

    embed = args.text_embedder != "none"
    if args.executor == "ray":
        cluster = RayExecutor(
            default_work_folder(Path(args.out)),
            address=args.ray_address,
            concurrency=args.ray_concurrency,
            batch_size=args.ray_batch_size,
            device=args.device,
            ocr_progress=encode_progress,
        )
        with cluster:
            report = build(
                cluster,
                cluster.text_encoder(args.text_embedder) if embed else None,
                cluster.clip_encoder(args.clip, args.clip_backend) if args.clip else None,
            )
        cluster.discard_work()
        print(cluster.summary())
    else:
        report = build(
            None,
            text_encoder(args.text_embedder, args.device) if embed else None,
            clip_encoder(args.clip, args.clip_backend, args.device) if args.clip else None,
        )
    for warning in report.warnings:
        print(f"mmrag: warning: {warning}", file=sys.stderr)
    print(report.summary())
    return 0


def run_stats(args: argparse.Namespace) -> int:
    from mmrag.indexes.collection import Collection

    collection = Collection(args.index)
    manifest = collection.manifest
    stats = {
        "index": str(args.index),
        "format_version": manifest["format_version"],
        "created_at": manifest["created_at"],
        "sources": manifest["sources"],
        "images": manifest["images"],
        "components": {
            name: {k: v for k, v in component.items() if k not in ("files", "probe")}
            for name, component in manifest["components"].items()
        },
        "image_vectors": collection.image_vectors,
        "ocr": collection.ocr,
        "bytes": sum(f["bytes"] for f in manifest["store"]["files"].values())
        + sum(
            f["bytes"]
            for component in manifest["components"].values()
            for f in component["files"].values()
        ),
        "verified": True,
    }
    print(json.dumps(stats, indent=2))
    return 0
