"""What checking every index file at load costs: digest speed, and `Collection` load time.

    python -m bench.verify --n 300000 --dim 512 --out docs/bench/verify.json

Builds a synthetic index of about 1 GB (the bench/synthetic.py corpus, BM25, and exact dense
vectors for both modalities from a random encoder of `--dim` dimensions), then reports:
XXH3-128 and SHA-256 (and BLAKE3, if the `blake3` package is installed, for comparison) speed
over a buffer in memory; XXH3-128 over the index files (the load's
check) from the page cache and from disk; and `Collection(...)` load seconds with the digest
check (the default) and without it (sizes only), warm and cold. Cold means every index file's
pages were dropped from the page cache (posix_fadvise DONTNEED) just before.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

import numpy as np
import xxhash

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.report import write_report
from bench.synthetic import write_corpus
from mmrag.indexes.collection import Collection, build_index
from mmrag.indexes.encoders.base import EncoderInfo, l2_normalise
from mmrag.indexes.manifest import check_index_files

BUFFER_BYTES = 256 << 20


class RandomEncoder:
    """Random unit vectors: the bytes on disk matter here, not what they mean."""

    def __init__(self, dim: int) -> None:
        self.info = EncoderInfo(kind="text", name="random", backend="bench", dim=dim)
        self.rng = np.random.default_rng(0)

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        return l2_normalise(self.rng.standard_normal((len(texts), self.info.dim), np.float32))


def in_memory_gb_s(digest, repeats: int = 3) -> float:
    data = np.random.default_rng(0).bytes(BUFFER_BYTES)
    best = min(timed(lambda: digest(data)) for _ in range(repeats))
    return round(BUFFER_BYTES / best / 1e9, 2)


def in_memory_speeds() -> dict[str, float]:
    speeds = {
        "xxh3_128": in_memory_gb_s(xxhash.xxh3_128_digest),
        "sha256": in_memory_gb_s(lambda data: hashlib.sha256(data).digest()),
    }
    try:
        import blake3
    except ImportError:
        return speeds
    return {**speeds, "blake3": in_memory_gb_s(lambda data: blake3.blake3(data).digest())}


def timed(function) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def index_files(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file()]


def drop_cache(root: Path) -> None:
    os.sync()
    for path in index_files(root):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def best_load(root: Path, verify: bool, cold: bool, repeats: int) -> float:
    seconds = []
    for _ in range(repeats):
        if cold:
            drop_cache(root)
        seconds.append(timed(lambda: Collection(root, verify=verify)))
    return round(min(seconds), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300_000, help="sources in the corpus")
    parser.add_argument("--dim", type=int, default=512, help="dense vector dimensions")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path("var/bench"))
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()

    corpus = args.workdir / f"synthetic-{args.n}.jsonl"
    if not corpus.exists():
        write_corpus(corpus, args.n)
    root = args.workdir / f"verify-{args.n}-{args.dim}"
    if not (root / "manifest.json").exists():
        build_index(
            [corpus], root, text_embedder=RandomEncoder(args.dim), dense_factory="Flat", force=True
        )
    total = sum(path.stat().st_size for path in index_files(root))
    collection = Collection(root)

    def check() -> None:
        check_index_files(root, collection.manifest)

    warm_check = min(timed(check) for _ in range(args.repeats))
    drop_cache(root)
    cold_check = timed(check)
    results = {
        "index_bytes": total,
        "files": len(index_files(root)),
        "in_memory_gb_s": in_memory_speeds(),
        "index_files_gb_s": {
            "warm": round(total / warm_check / 1e9, 2),
            "cold": round(total / cold_check / 1e9, 2),
        },
        "load_s": {
            f"{state}_{mode}": best_load(root, verify, state == "cold", args.repeats)
            for state in ("warm", "cold")
            for mode, verify in (("verified", True), ("sizes_only", False))
        },
    }
    write_report(results, args.out)


if __name__ == "__main__":
    main()
