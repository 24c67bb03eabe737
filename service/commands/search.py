"""`mmrag search`: the index's ranked sources for one question, as text or JSON."""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path
from typing import get_args

from mmrag.core.options import add_config_option, add_retrieval_options, settings_from
from mmrag.retrieval.types import ModalityFilter


def register(commands: argparse._SubParsersAction) -> None:
    search = commands.add_parser("search", help="retrieve sources for a question")
    search.add_argument("question")
    search.add_argument("--index", type=Path, required=True)
    search.add_argument("--k", type=int, default=10, help="number of hits (default 10)")
    search.add_argument("--modality", choices=get_args(ModalityFilter), default="all")
    add_config_option(search)
    add_retrieval_options(search)
    search.add_argument("--json", action="store_true", help="print a JSON list of hits")
    search.set_defaults(run=run_search)


def run_search(args: argparse.Namespace) -> int:
    from mmrag.core.components import build_retriever
    from mmrag.service.schemas import SearchHit

    retriever = build_retriever(settings_from(args))
    candidates = retriever.search(args.question, args.k, args.modality)
    hits = [SearchHit.from_candidate(candidate) for candidate in candidates]
    if args.json:
        print(json.dumps([hit.model_dump() for hit in hits], indent=2, ensure_ascii=False))
        return 0
    for rank, hit in enumerate(hits, start=1):
        print(f"{rank:>2}. [{hit.modality}] {hit.source_id}  {hit.score:.3f}  {hit.title}")
        print(textwrap.indent(textwrap.shorten(hit.text, 200), "      "))
    if not hits:
        print("no hits")
    return 0
