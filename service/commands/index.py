"""`mmrag index build|stats`: turn a corpus into a persistent index, and describe one."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


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
    build.add_argument("--out", type=Path, required=True, help="index directory to write")
    build.add_argument("--k1", type=float, default=1.5)
    build.add_argument("--b", type=float, default=0.75)
    build.add_argument(
        "--method",
        default="lucene",
        choices=["lucene", "robertson", "atire", "bm25l", "bm25+"],
        help="BM25 variant (bm25s naming)",
    )
    build.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar (it is also off when stderr is not a terminal)",
    )
    build.set_defaults(run=run_build)

    stats = actions.add_parser("stats", help="describe an index")
    stats.add_argument("--index", type=Path, required=True)
    stats.add_argument("--verify", action="store_true", help="check every file's SHA-256")
    stats.set_defaults(run=run_stats)


def run_build(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from indexes.bm25 import BM25Params
    from indexes.collection import build_index

    def progress(sources):
        return tqdm(
            sources,
            desc="indexing",
            unit=" sources",
            file=sys.stderr,
            disable=True if args.quiet else None,
        )

    report = build_index(
        args.corpus,
        args.out,
        images=args.images,
        bm25=BM25Params(k1=args.k1, b=args.b, method=args.method),
        progress=progress,
    )
    print(report.summary())
    return 0


def run_stats(args: argparse.Namespace) -> int:
    from indexes.collection import Collection

    collection = Collection(args.index, verify=args.verify)
    manifest = collection.manifest
    stats = {
        "index": str(args.index),
        "format_version": manifest["format_version"],
        "created_at": manifest["created_at"],
        "sources": manifest["sources"],
        "images": manifest["images"],
        "components": {
            name: component.get("params", {}) for name, component in manifest["components"].items()
        },
        "bytes": sum(f["bytes"] for f in manifest["store"]["files"].values())
        + sum(
            f["bytes"]
            for component in manifest["components"].values()
            for f in component["files"].values()
        ),
        "verified": args.verify,
    }
    print(json.dumps(stats, indent=2))
    return 0
