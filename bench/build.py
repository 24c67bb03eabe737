"""Index build time on one machine: mmrag against Haystack's indexing pipeline, same MiniLM.

    python -m bench.build --n 10000 --out docs/bench/build-10k.json

Both build BM25 + all-MiniLM-L6-v2 (the packaged weights) over the same synthetic corpus of
WebQA's shape (bench/synthetic.py), each in a fresh process, so imports and model loading count
as a user's build pays them: mmrag through `mmrag index build` (store, BM25, one vector list per
modality, faiss, checksums, atomic commit); Haystack through its documented indexing pipeline
(`SentenceTransformersDocumentEmbedder` embedding title + text, `DocumentWriter` into an
`InMemoryDocumentStore`, whose BM25 statistics are kept as documents are written). Wall time and
the CPU seconds of the child process are reported. Haystack is not a dependency of mmrag: the
Haystack run happens when `haystack` imports (e.g. `pip install --target DIR haystack-ai` and
`--haystack-path DIR`; since Haystack 3 the embedder is in `sentence-transformers-haystack`),
and is skipped, saying so, otherwise.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.report import machine, write_report
from bench.synthetic import write_corpus
from mmrag.indexes.encoders.text import DEFAULT_TEXT_EMBEDDER, resolve_text_embedder

HAYSTACK_BUILD = """
import json, sys
sys.path.append(sys.argv[3])
from haystack import Document, Pipeline
from haystack_integrations.components.embedders.sentence_transformers import (
    SentenceTransformersDocumentEmbedder,
)
from haystack.components.writers import DocumentWriter
from haystack.document_stores.in_memory import InMemoryDocumentStore

with open(sys.argv[1]) as handle:
    records = [json.loads(line) for line in handle]
documents = [
    Document(id=r["id"], content=r["text"], meta={"title": r["title"], "modality": r["modality"]})
    for r in records
]
store = InMemoryDocumentStore(bm25_algorithm="BM25Okapi")
pipeline = Pipeline()
pipeline.add_component(
    "embedder",
    SentenceTransformersDocumentEmbedder(
        model=sys.argv[2], meta_fields_to_embed=["title"], progress_bar=False
    ),
)
pipeline.add_component("writer", DocumentWriter(document_store=store))
pipeline.connect("embedder.documents", "writer.documents")
pipeline.run({"embedder": {"documents": documents}})
assert store.count_documents() == len(documents)
"""


def timed_child(command: list[str]) -> dict:
    """Wall and CPU seconds (user + system) of one child process run to completion."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode:
        raise SystemExit(f"{command[:4]} failed: {result.stderr.strip()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1)}


def haystack_available(path: str) -> bool:
    probe = f"import sys; sys.path.append({path!r}); import haystack"
    return subprocess.run([sys.executable, "-c", probe], capture_output=True).returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000, help="synthetic sources")
    parser.add_argument("--rounds", type=int, default=1, help="alternating runs of each")
    parser.add_argument("--haystack-path", default="", help="extra folder holding haystack-ai")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    model = resolve_text_embedder(DEFAULT_TEXT_EMBEDDER)
    results: dict = {
        "machine": machine(),
        "sources": args.n,
        "mmrag": [],
    }
    with_haystack = haystack_available(args.haystack_path)
    if with_haystack:
        results["haystack"] = []
    else:
        results["haystack"] = "not run: haystack-ai does not import (see --haystack-path)"
    with tempfile.TemporaryDirectory() as tmp:
        corpus = write_corpus(Path(tmp) / "corpus.jsonl", args.n)
        for round_ in range(args.rounds):
            out = Path(tmp) / f"index-{round_}"
            mmrag = [sys.executable, "-m", "mmrag.service.cli", "index", "build"]
            mmrag += ["--corpus", str(corpus), "--out", str(out), "--quiet"]
            results["mmrag"].append(timed_child(mmrag))
            if with_haystack:
                haystack = [sys.executable, "-c", HAYSTACK_BUILD, str(corpus), model]
                results["haystack"].append(timed_child([*haystack, args.haystack_path]))
            print(results, file=sys.stderr)
    write_report(results, args.out)


if __name__ == "__main__":
    main()
