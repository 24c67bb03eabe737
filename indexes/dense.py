"""Dense vectors in faiss, one index per (encoder, modality).

Exact inner-product search (`Flat`) up to `FLAT_LIMIT` vectors; above it an IVF index whose
`nprobe` is tuned at build time to reach the target recall@10 against exact search, so the
speed/recall trade-off is measured rather than guessed, and recorded in the manifest. Any faiss
factory string (e.g. "HNSW32", "IVF4096,PQ64") can be asked for instead. Vectors are saved as
float16 beside the index so it can be rebuilt with other parameters without re-encoding.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mmrag.indexes.encoders.base import EncoderInfo

DENSE_DIR = "dense"
FLAT_LIMIT = 100_000
TARGET_RECALL = 0.95
TUNING_QUERIES = 200
TIE_MARGIN = 8  # results fetched beyond k, so a tie at the k-th place is settled by row


@dataclass
class DenseParams:
    factory: str = "auto"
    search: dict[str, int] = field(default_factory=dict)  # e.g. {"nprobe": 32}
    recall_at_10: float | None = None  # of the tuned search parameters, vs exact


def _faiss():
    import faiss

    return faiss


def auto_factory(n: int) -> str:
    if n <= FLAT_LIMIT:
        return "Flat"
    nlist = 2 ** round(math.log2(4 * math.sqrt(n)))
    return f"IVF{nlist},Flat"


def _search_knob(index) -> str | None:
    faiss = _faiss()
    if faiss.try_extract_index_ivf(index) is not None:
        return "nprobe"
    if "HNSW" in type(index).__name__:
        return "efSearch"
    return None


def _set_knob(index, knob: str, value: int) -> None:
    _faiss().ParameterSpace().set_index_parameter(index, knob, value)


def training_sample(vectors: np.ndarray, index, per_list: int = 64) -> np.ndarray:
    """k-means on 930K x 512 is minutes on 2 cores; 64 points per list trains IVF as well."""
    ivf = _faiss().try_extract_index_ivf(index)
    limit = max(per_list * ivf.nlist, 10_000) if ivf is not None else len(vectors)
    if len(vectors) <= limit:
        return vectors
    rng = np.random.default_rng(0)
    return vectors[np.sort(rng.choice(len(vectors), limit, replace=False))]


def exact_top10(vectors: np.ndarray, queries: np.ndarray) -> np.ndarray:
    faiss = _faiss()
    exact = faiss.IndexFlatIP(vectors.shape[1])
    exact.add(vectors)
    return exact.search(queries, 10)[1]


def recall_at_10(index, vectors: np.ndarray, queries: np.ndarray) -> float:
    truth = exact_top10(vectors, queries)
    found = index.search(queries, 10)[1]
    hits = sum(len(set(t) & set(f)) for t, f in zip(truth, found, strict=True))
    return hits / truth.size


def tuning_queries(vectors: np.ndarray, count: int = TUNING_QUERIES, seed: int = 0) -> np.ndarray:
    """Stored vectors plus noise: near, not on, the data, as real queries are."""
    rng = np.random.default_rng(seed)
    picked = vectors[rng.choice(len(vectors), min(count, len(vectors)), replace=False)]
    noisy = picked + rng.normal(0, 0.05, picked.shape).astype(np.float32)
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


class TorchExactSearch:
    """Exact search as one matrix product + top-k on a torch device (fp16 on GPUs).

    faiss-GPU needs CUDA libraries the GPU hosts here lack; 930K x 512 fp16 vectors are 1 GB of
    GPU memory and a batch of queries is a single GEMM, so exact search on the GPU is both
    simpler and faster than an approximate index there.
    """

    def __init__(self, vectors: np.ndarray, device: str) -> None:
        import torch

        self.torch = torch
        self.device = device
        dtype = torch.float16 if device.startswith("cuda") else torch.float32
        self.vectors = torch.from_numpy(np.array(vectors)).to(device=device, dtype=dtype)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        torch = self.torch
        with torch.inference_mode():
            q = torch.from_numpy(np.ascontiguousarray(queries)).to(self.device, self.vectors.dtype)
            scores, positions = torch.topk(q @ self.vectors.T, k, dim=1)
        return scores.float().cpu().numpy(), positions.cpu().numpy()


class DenseIndex:
    def __init__(
        self,
        index,
        rows: np.ndarray,
        info: EncoderInfo,
        params: DenseParams,
        folder: Path | None = None,
    ) -> None:
        self.index = index
        self.rows = rows  # store row of each vector
        self.info = info
        self.params = params
        self.folder = folder
        self.torch_search: TorchExactSearch | None = None
        self._vectors: np.ndarray | None = None

    def saved_vectors(self) -> np.ndarray:
        """The float16 vectors beside the index, memory-mapped once and kept."""
        if self.folder is None:
            raise ValueError("only a saved index has its vectors on disk")
        if self._vectors is None:
            self._vectors = np.load(self.folder / "vectors.npy", mmap_mode="r")
        return self._vectors

    def use_torch(self, device: str) -> None:
        """Search exactly on `device` from the saved vectors, instead of with faiss."""
        self.torch_search = TorchExactSearch(self.saved_vectors(), device)

    @classmethod
    def build(
        cls, vectors: np.ndarray, rows: np.ndarray, info: EncoderInfo, factory: str = "auto"
    ) -> DenseIndex:
        faiss = _faiss()
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        chosen = auto_factory(len(vectors)) if factory == "auto" else factory
        index = faiss.index_factory(vectors.shape[1], chosen, faiss.METRIC_INNER_PRODUCT)
        if not index.is_trained:
            index.train(training_sample(vectors, index))
        index.add(vectors)
        params = DenseParams(factory=chosen, recall_at_10=1.0 if chosen == "Flat" else None)
        knob = _search_knob(index)
        if knob is None and chosen != "Flat" and len(vectors):
            params.recall_at_10 = round(recall_at_10(index, vectors, tuning_queries(vectors)), 4)
        if knob and len(vectors):
            queries = tuning_queries(vectors)
            for value in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024):
                _set_knob(index, knob, value)
                params.search = {knob: value}
                params.recall_at_10 = round(recall_at_10(index, vectors, queries), 4)
                if params.recall_at_10 >= TARGET_RECALL:
                    break
        return cls(index, np.asarray(rows, dtype=np.int64), info, params)

    def __len__(self) -> int:
        return len(self.rows)  # one per vector, whichever searcher holds them

    def scores_of(self, query: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Exact inner products of one query with the vectors of given store rows.

        For ranking a fixed candidate set (WebQA's restricted setting): a handful of rows, read
        from the memory-mapped float16 vectors, not a search over the index.
        """
        vectors = self.saved_vectors()
        positions = np.searchsorted(self.rows, rows)
        if len(rows) and (
            positions.max() >= len(self.rows) or not np.array_equal(self.rows[positions], rows)
        ):
            raise ValueError("some rows have no vector in this index")
        return np.asarray(vectors[positions], dtype=np.float32) @ np.asarray(query, np.float32)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(store rows, scores), each (n_queries, k), equal scores in row order; rows of
        missing results are -1.

        Neither faiss's heaps nor torch.topk define the order of equal scores (duplicate
        captions embed identically), so a few more than k are fetched, sorted by (score, row)
        and cut; while a tie reaches past what was fetched, more are fetched.
        """
        k = min(k, len(self))
        if k == 0:
            empty = np.empty((len(queries), 0))
            return empty.astype(np.int64), empty.astype(np.float32)
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        searcher = self.torch_search or self.index
        fetch = min(len(self), k + TIE_MARGIN)
        while True:
            scores, positions = searcher.search(queries, fetch)
            if fetch == len(self) or not np.any(scores[:, k - 1] == scores[:, fetch - 1]):
                break
            fetch = min(len(self), 2 * fetch)
        rows = np.where(positions >= 0, self.rows[positions], -1)
        order = np.lexsort((np.where(rows >= 0, rows, len(self.rows)), -scores))[:, :k]
        return np.take_along_axis(rows, order, 1), np.take_along_axis(scores, order, 1)

    def save(self, folder: Path, vectors: np.ndarray) -> None:
        faiss = _faiss()
        folder.mkdir(parents=True, exist_ok=True)
        faiss.write_index(self.index, str(folder / "index.faiss"))
        np.save(folder / "vectors.npy", vectors.astype(np.float16))
        np.save(folder / "rows.npy", self.rows)
        meta = {"encoder": self.info.to_dict(), "params": asdict(self.params)}
        (folder / "dense.json").write_text(json.dumps(meta, indent=2))

    @classmethod
    def load(cls, folder: Path) -> DenseIndex:
        faiss = _faiss()
        meta = json.loads((folder / "dense.json").read_text())
        index = faiss.read_index(str(folder / "index.faiss"))
        params = DenseParams(**meta["params"])
        for knob, value in params.search.items():
            _set_knob(index, knob, value)
        rows = np.load(folder / "rows.npy")
        return cls(index, rows, EncoderInfo(**meta["encoder"]), params, folder)

    def describe(self) -> dict[str, Any]:
        return {"vectors": len(self), "encoder": self.info.to_dict(), **asdict(self.params)}
