"""BM25 at WebQA scale: mmrag's bm25s index against rank_bm25 on the same corpus and queries.

    python bench/bm25.py --n 930000            # full WebQA scale (~390K captions + 540K snippets)
    python bench/bm25.py --n 100000 --queries 200

Reports build seconds, index bytes, peak RSS of the build, per-query latency p50/p99 (a whole
`HybridRetriever.search`, records included), and the same for rank_bm25's BM25Okapi fed exactly the
same tokens. Both use the Robertson/Okapi variant so their top-10 lists can be compared; bm25s's
default (Lucene IDF) costs the same. rank_bm25 scores every document in Python, so it runs
fewer queries (--reference-queries) and, with --reference-n, on a prefix of the corpus.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.report import latency_percentiles, write_report
from bench.synthetic import queries, write_corpus
from mmrag.indexes.bm25 import BM25Index, BM25Params, top_k
from mmrag.indexes.collection import Collection, build_index
from mmrag.retrieval.hybrid import HybridRetriever

PARAMS = BM25Params(method="robertson")


def _build(corpus: Path, out: Path, queue) -> None:
    started = time.perf_counter()
    report = build_index([corpus], out, bm25=PARAMS)
    queue.put((time.perf_counter() - started, report.bytes))


def build_in_child(corpus: Path, out: Path) -> dict:
    """A child process, so peak RSS is the build's own and not the generator's or rank_bm25's."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_build, args=(corpus, out, queue))
    child.start()
    seconds, size = queue.get()
    child.join()
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {
        "build_s": round(seconds, 2),
        "index_bytes": size,
        "build_peak_rss_mb": round(peak_kb / 1024),
    }


def percentiles(latencies: list[float]) -> dict:
    return {**latency_percentiles(latencies), "queries": len(latencies)}


def timed(function, items) -> tuple[list, list[float]]:
    results, latencies = [], []
    for item in items:
        started = time.perf_counter()
        results.append(function(item))
        latencies.append(time.perf_counter() - started)
    return results, latencies


def reference_run(index: BM25Index, corpus: Path, limit: int, query_texts: list[str]) -> dict:
    import rank_bm25

    texts = []
    with corpus.open() as handle:
        for line in handle:
            if len(texts) == limit:
                break
            record = json.loads(line)
            texts.append(f"{record['title']}. {record['text']}")
    token_ids = index.tokenizer.tokenize(
        texts, update_vocab="never", return_as="ids", show_progress=False
    )
    del texts
    started = time.perf_counter()
    reference = rank_bm25.BM25Okapi(
        [[str(t) for t in ids] for ids in token_ids], k1=PARAMS.k1, b=PARAMS.b
    )
    build_s = time.perf_counter() - started

    def search(query: str) -> np.ndarray:
        scores = reference.get_scores([str(t) for t in index.query_ids(query)])
        return top_k(scores, 10)[0]

    tops, latencies = timed(search, query_texts)
    return {"build_s": round(build_s, 2), **percentiles(latencies), "top10": tops}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=930_000, help="sources in the corpus")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--reference-queries", type=int, default=20)
    parser.add_argument("--reference-n", type=int, help="rank_bm25 on the first N sources only")
    parser.add_argument("--workdir", type=Path, default=Path("var/bench"))
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()

    corpus = args.workdir / f"synthetic-{args.n}.jsonl"
    if not corpus.exists():
        started = time.perf_counter()
        write_corpus(corpus, args.n)
        print(f"generated {corpus} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    index_dir = args.workdir / f"bm25-{args.n}"
    results: dict = {
        "n": args.n,
        "params": PARAMS.__dict__,
        "bm25s": build_in_child(corpus, index_dir),
    }

    collection = Collection(index_dir)
    retriever = HybridRetriever(collection)
    query_texts = queries(args.queries)
    retriever.search(query_texts[0], 10)  # page in the memory-mapped matrix once
    _, latencies = timed(lambda q: retriever.search(q, 10), query_texts)
    results["bm25s"].update(percentiles(latencies))

    reference_n = min(args.reference_n or args.n, args.n)
    reference_queries = query_texts[: args.reference_queries]
    reference = reference_run(collection.bm25, corpus, reference_n, reference_queries)
    if reference_n == args.n:
        ours_index = collection.bm25
    else:  # the same prefix, indexed by bm25s with the same tokenizer, for a like-for-like top-10
        with corpus.open() as handle:
            prefix = [f"{r['title']}. {r['text']}" for r in map(json.loads, handle)][:reference_n]
        ours_index = BM25Index.build(prefix, PARAMS)
    ours_tops = [ours_index.search(q, 10)[0] for q in reference_queries]
    identical = sum(
        list(a) == list(b) for a, b in zip(ours_tops, reference.pop("top10"), strict=True)
    )
    reference["n"] = reference_n
    results["rank_bm25"] = reference
    results["identical_top10"] = f"{identical}/{len(reference_queries)}"
    results["speedup_p50"] = round(reference["p50_ms"] / results["bm25s"]["p50_ms"], 1)
    write_report(results, args.out)


if __name__ == "__main__":
    main()
