"""BM25 at WebQA scale: mmrag's bm25s index against rank_bm25 on the same corpus and queries.

    python bench/bm25.py --n 930000            # full WebQA scale (~390K captions + 540K snippets)
    python bench/bm25.py --n 100000 --queries 200

Reports build seconds, index bytes, peak RSS of the build, per-query latency p50/p99 (a whole
`HybridRetriever.search`, records included), and the same for rank_bm25's BM25Okapi fed exactly the
same tokens. Two identity checks hold the fast paths to bm25s's own: every query's ranked lists
against bm25s's scoring over every row (`np.add.at`, top-k per modality, as mmrag ranked before
issue 40), and, with --check-build, the whole score matrix and vocabulary against bm25s's own
document-at-a-time build of the same corpus (another minute and 1.5 GB at 930K).
Both use the Robertson/Okapi variant so their top-10 lists can be compared; bm25s's default
(Lucene IDF) costs the same. rank_bm25 scores every document in Python, so it runs fewer
queries (--reference-queries) and, with --reference-n, on a prefix of the corpus.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import sys
import time
from pathlib import Path

import bm25s
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.report import latency_percentiles, write_report
from bench.synthetic import queries, write_corpus
from mmrag.indexes.bm25 import BM25Index, BM25Params, make_tokenizer, top_k
from mmrag.indexes.bm25_build import index_as_bm25s
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


def bm25s_lists(index: BM25Index, rows_by_modality: dict, query: str, depth: int) -> dict:
    """A query's BM25 lists as mmrag ranked them before issue 40: bm25s's own scoring of every
    row, top-k among each modality's rows, rows scoring nothing dropped."""
    ids = index.query_ids(query)
    scores = index.model.get_scores_from_ids(ids) if ids else np.zeros(index.num_docs, np.float32)
    lists = {}
    for modality, rows in rows_by_modality.items():
        top, values = top_k(scores, depth, rows)
        lists[f"bm25/{modality}"] = (top[values > 0], values[values > 0])
    return lists


def same_lists(ours: dict, theirs: dict) -> bool:
    return ours.keys() == theirs.keys() and all(
        np.array_equal(ours[key][0], theirs[key][0])
        and np.array_equal(ours[key][1], theirs[key][1])
        for key in ours
    )


def corpus_texts(corpus: Path, limit: int | None = None) -> list[str]:
    """The texts the index was built from, as `Source.search_text` gives them."""
    texts = []
    with corpus.open() as handle:
        for line in handle:
            if len(texts) == limit:
                break
            record = json.loads(line)
            texts.append(f"{record['title']}. {record['text']}")
    return texts


def same_build(index: BM25Index, corpus: Path) -> bool:
    """The index's score matrix and vocabulary equal bm25s's own build of the same texts."""
    tokenizer = make_tokenizer(PARAMS)
    model = bm25s.BM25(k1=PARAMS.k1, b=PARAMS.b, method=PARAMS.method)
    index_as_bm25s(model, tokenizer, corpus_texts(corpus))
    return all(
        np.array_equal(model.scores[key], index.model.scores[key])
        for key in ("data", "indices", "indptr")
    ) and list(tokenizer.word_to_id.items()) == list(index.tokenizer.word_to_id.items())


def reference_run(index: BM25Index, corpus: Path, limit: int, query_texts: list[str]) -> dict:
    import rank_bm25

    texts = corpus_texts(corpus, limit)
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
    parser.add_argument(
        "--check-build", action="store_true", help="compare the index with bm25s's own build"
    )
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
    depth = max(10, retriever.depth)
    rows_by_modality = collection.store.rows_by_modality
    same = sum(
        same_lists(
            retriever.ranked_lists(q, depth=depth),
            bm25s_lists(collection.bm25, rows_by_modality, q, depth),
        )
        for q in query_texts
    )
    results["identical_to_bm25s_scoring"] = f"{same}/{len(query_texts)}"
    if args.check_build:
        results["identical_to_bm25s_build"] = same_build(collection.bm25, corpus)

    reference_n = min(args.reference_n or args.n, args.n)
    reference_queries = query_texts[: args.reference_queries]
    reference = reference_run(collection.bm25, corpus, reference_n, reference_queries)
    if reference_n == args.n:
        ours_index = collection.bm25
    else:  # the same prefix, indexed by bm25s with the same tokenizer, for a like-for-like top-10
        ours_index = BM25Index.build(corpus_texts(corpus, reference_n), PARAMS)
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
