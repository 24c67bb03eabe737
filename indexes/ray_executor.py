"""Index builds on a Ray cluster: the three expensive maps of a build as Ray Data jobs.

For users who outgrow one machine (WebQA's 540K snippets take MiniLM hours on two cores; OCR
of its 390K images, days), the maps of `mmrag.indexes.executor` run as Ray Data `map_batches`
over actor pools, one model per actor, with a GPU per actor when the cluster has GPUs. Each
batch that comes back is written at once to a work folder beside the index (OUT.ray-work/),
under a name derived from what was computed (the model and every input), so a build that
crashes or is stopped resumes from the batches it finished, and one over changed inputs
starts afresh. The vectors come back to this process, which builds faiss, BM25 and the
manifest as a local build does, and commits the index with the same atomic swap.

Workers read the corpus's images themselves (no image bytes go through this process), so
every node must see the image files at the same path, as on any cluster with shared storage.
Ray is an optional extra (`mmrag[ray]`) and is imported only here.
"""

from __future__ import annotations

import io
import json
import logging
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

from mmrag.indexes.atomic import atomic_write_bytes
from mmrag.indexes.encoders.base import PROBE_TEXT, EncoderInfo
from mmrag.indexes.encoders.loading import clip_encoder, text_encoder
from mmrag.indexes.encoders.prefetch import batch_pixels
from mmrag.indexes.errors import InputError
from mmrag.indexes.executor import RAY_BATCH_SIZE, Progress, no_progress
from mmrag.indexes.images import MAX_IMAGE_PIXELS, ImageStore
from mmrag.indexes.ocr.batch import OcrRunStats, note_unreadable, read_one
from mmrag.indexes.ocr.build import OcrOptions
from mmrag.indexes.ocr.cache import OcrCache
from mmrag.indexes.ocr.reader import OcrModels, OcrReader, cuda_available, reader_identity
from mmrag.indexes.ray_cluster import ClusterShape, connect, disconnect, require_ray
from mmrag.indexes.sources import OcrLine

WORK_MARKER = ".mmrag-ray-work"  # only a folder holding it is ever deleted as ours


def default_work_folder(out: Path) -> Path:
    """Beside the index, not in it: a killed build's temp folder goes, finished batches stay."""
    return out.with_name(f"{out.name}.ray-work")


@dataclass(frozen=True)
class EncoderSpec:
    """What an actor loads: an encoder by hub name or path, on the device its slot gives."""

    kind: str  # "text" or "clip"
    name: str
    backend: str = "sentence-transformers"
    device: str = "cpu"

    def load(self) -> Any:
        if self.kind == "text":
            return text_encoder(self.name, self.device)
        return clip_encoder(self.name, self.backend, self.device)


def _describe(spec: EncoderSpec, texts: list[str]) -> tuple[EncoderInfo, np.ndarray]:
    encoder = spec.load()
    return encoder.info, encoder.encode_texts(texts)


class RemoteEncoder:
    """An encoder that lives on the cluster. Its identity and the probe a manifest embeds are
    computed there by one task, so the building machine never loads the model: it may have no
    GPU, or not the memory for a 7B embedder."""

    def __init__(self, spec: EncoderSpec, num_gpus: float) -> None:
        self.spec = spec
        self.num_gpus = num_gpus
        self._info: EncoderInfo | None = None
        self._encoded: dict[tuple[str, ...], np.ndarray] = {}

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        key = tuple(texts)
        if key not in self._encoded:
            task = require_ray().remote(num_cpus=1, num_gpus=self.num_gpus)(_describe)
            self._info, self._encoded[key] = require_ray().get(task.remote(self.spec, list(texts)))
        return self._encoded[key]

    @property
    def info(self) -> EncoderInfo:
        if self._info is None:
            self.encode_texts([PROBE_TEXT])  # the manifest asks for the probe next
        assert self._info is not None
        return self._info


# --- the actors: one model each, loaded once ---------------------------------------------------


class _TextVectors:
    def __init__(self, spec: EncoderSpec) -> None:
        self.encoder = spec.load()

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        vectors = self.encoder.encode_texts(batch["text"].tolist())
        return {"pos": batch["pos"], "vector": vectors}


class _ImageVectors:
    def __init__(self, spec: EncoderSpec, images: ImageStore) -> None:
        self.clip = spec.load()
        self.images = images

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Each actor reads its batch's bytes itself; on a GPU actor they are decoded and
        preprocessed on its device (`gpu_images`), so only references come in and vectors
        go back: no pixels cross between processes."""
        pixels, decoded = batch_pixels(self.clip, self.images, batch["ref"].tolist())
        return {"pos": batch["pos"], "vector": self.clip.encode_pixels(pixels), "ok": decoded}


class _SceneText:
    def __init__(self, models: OcrModels, images: ImageStore, max_pixels: int) -> None:
        self.reader = OcrReader(models, threads=1)
        self.images = images
        self.max_pixels = max_pixels

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        digests, lines, errors = [], [], []
        for ref in batch["ref"].tolist():
            try:
                data = self.images.read_bytes(ref)
            except InputError as exc:
                result: list[OcrLine] | str = str(exc)
                digests.append("")
            else:
                result = read_one(self.reader, data, self.max_pixels)
                digests.append(xxhash.xxh3_128_hexdigest(data))
            failed = isinstance(result, str)
            errors.append(result if failed else "")
            lines.append("" if failed else json.dumps([line.to_dict() for line in result]))
        return {
            "pos": batch["pos"],
            "digest": np.array(digests),
            "lines": np.array(lines),
            "error": np.array(errors),
        }


# --- finished batches on disk ------------------------------------------------------------------


class FinishedBatches:
    """One map's results so far: a .npz file per batch that came back, written atomically, so
    a torn file never exists and every file read back is whole."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def load(self) -> list[dict[str, np.ndarray]]:
        parts = sorted(self.folder.glob("part-*.npz")) if self.folder.is_dir() else []
        loaded = []
        for part in parts:
            with np.load(part) as arrays:
                loaded.append({name: arrays[name] for name in arrays.files})
        return loaded

    def save(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Write one batch; return it as written (Ray hands strings back as object arrays,
        which only pickle could load, so they are stored as text)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        plain = {name: _plain(values) for name, values in batch.items()}
        buffer = io.BytesIO()
        np.savez(buffer, **plain)
        first = int(plain["pos"][0])
        atomic_write_bytes(
            self.folder / f"part-{first:010d}-{len(plain['pos'])}.npz", buffer.getvalue()
        )
        return plain


def _plain(values: np.ndarray) -> np.ndarray:
    return values.astype(str) if values.dtype == object else values


def _location(images: ImageStore) -> tuple:
    """Where a store's images are: the arguments it is pickled with (see its __reduce__)."""
    return images.__reduce__()[1]


def _fingerprint(*parts: object, items: Sequence[str]) -> str:
    digest = xxhash.xxh3_128(json.dumps(parts, sort_keys=True, default=str).encode())
    for item in items:
        digest.update(item.encode("utf-8", "surrogatepass") + b"\x00")
    return digest.hexdigest()[:20]


@dataclass
class RayRunStats:
    computed: int = 0  # items computed by this run
    reused: int = 0  # items found in the batches an earlier, interrupted run finished
    maps: list[str] = field(default_factory=list)


class RayExecutor:
    """The build's maps on a Ray cluster (see the module doc). Use as a context manager: it
    connects on entry (or starts a local Ray instance without an address) and disconnects on
    exit; `discard_work()` removes the finished batches once the index is committed."""

    def __init__(
        self,
        work: Path,
        *,
        address: str | None = None,
        concurrency: int | None = None,
        batch_size: int = RAY_BATCH_SIZE,
        device: str | None = None,
        max_pixels: int = MAX_IMAGE_PIXELS,
        ocr_progress: Progress = no_progress,
    ) -> None:
        if concurrency is not None and concurrency < 1:
            raise InputError(f"--ray-concurrency must be at least 1, got {concurrency}")
        if batch_size < 1:
            raise InputError(f"--ray-batch-size must be at least 1, got {batch_size}")
        self.work = work
        self.address = address
        self.concurrency = concurrency
        self.batch_size = batch_size
        self.device = device
        self.max_pixels = max_pixels
        self.ocr_progress = ocr_progress  # build_ocr sees OCR results only once all are in
        self.stats = RayRunStats()
        self.shape = ClusterShape(nodes=0, cpus=0, gpus=0)

    def __enter__(self) -> RayExecutor:
        self.shape = connect(self.address)
        context = require_ray().data.DataContext.get_current()
        context.enable_progress_bars = False  # ours are drawn by the caller
        context.print_on_execution_start = False
        logging.getLogger("ray.data").setLevel(logging.ERROR)  # "progress bars disabled"
        if self.device and self.device.startswith("cuda") and not self.shape.gpus:
            disconnect()
            raise InputError(
                f"--device {self.device}: the Ray cluster has no GPU ({self.shape.nodes} "
                f"nodes, {self.shape.cpus} CPUs); pass --device cpu or add GPU nodes"
            )
        return self

    def __exit__(self, *_: object) -> None:
        disconnect()

    def _gpu_per_actor(self) -> float:
        return 1.0 if self.shape.gpus and self.device != "cpu" else 0.0

    def _ocr_gpu_per_actor(self) -> float:
        """A GPU per OCR actor only where the GPU nodes' onnxruntime has its CUDA provider:
        PP-OCR on a CPU-only onnxruntime would hold a GPU each and leave most CPUs idle."""
        if not self._gpu_per_actor():
            return 0.0
        ray = require_ray()
        return 1.0 if ray.get(ray.remote(num_cpus=0, num_gpus=1)(cuda_available).remote()) else 0.0

    def _pool_size(self, num_gpus: float) -> int:
        if self.concurrency:
            return self.concurrency
        return max(1, self.shape.gpus if num_gpus else self.shape.cpus)

    # --- encoders that live on the cluster ---

    def text_encoder(self, name: str) -> RemoteEncoder:
        gpu = self._gpu_per_actor()
        spec = EncoderSpec("text", name, device="cuda" if gpu else "cpu")
        return RemoteEncoder(spec, gpu)

    def clip_encoder(self, name: str, backend: str) -> RemoteEncoder:
        gpu = self._gpu_per_actor()
        return RemoteEncoder(EncoderSpec("clip", name, backend, "cuda" if gpu else "cpu"), gpu)

    # --- the three maps ---

    def text_vectors(
        self, encoder: RemoteEncoder, texts: Sequence[str], progress: Progress, label: str
    ) -> np.ndarray:
        """Shortest texts first, as the local build does, so batches pad little."""
        order = np.argsort([len(text) for text in texts], kind="stable")
        results = self._map(
            label,
            _fingerprint("text", encoder.spec, items=texts),
            {"text": [texts[i] for i in order]},
            order,
            _TextVectors,
            (encoder.spec,),
            encoder.num_gpus,
            progress,
        )
        vectors = np.empty((len(texts), encoder.info.dim), np.float32)
        if len(texts):
            vectors[results["pos"]] = results["vector"]
        return vectors

    def image_vectors(
        self, clip: RemoteEncoder, images: ImageStore, refs: Sequence[str], progress: Progress
    ) -> tuple[np.ndarray, np.ndarray]:
        results = self._map(
            "clip images",
            _fingerprint("clip", clip.spec, _location(images), items=refs),
            {"ref": list(refs)},
            np.arange(len(refs)),
            _ImageVectors,
            (clip.spec, images),
            clip.num_gpus,
            progress,
        )
        vectors = np.empty((len(refs), clip.info.dim), np.float32)
        decoded = np.zeros(len(refs), bool)
        if len(refs):
            vectors[results["pos"]] = results["vector"]
            decoded[results["pos"]] = results["ok"]
        return vectors, decoded

    def read_text(
        self,
        images: ImageStore,
        refs: Sequence[str],
        cache: OcrCache,
        options: OcrOptions,
        stats: OcrRunStats,
    ) -> Iterator[tuple[str, list[OcrLine] | None]]:
        """OCR on the cluster's actors. Lines read are also added to the OCR cache, so a later
        local build of the same images reads none of them again."""
        options.models.check()
        results = self._map(
            "ocr",
            _fingerprint(
                "ocr",
                reader_identity(options.models),
                _location(images),
                self.max_pixels,
                items=refs,
            ),
            {"ref": list(refs)},
            np.arange(len(refs)),
            _SceneText,
            (options.models, images, self.max_pixels),
            self._ocr_gpu_per_actor(),
            self.ocr_progress,
        )
        by_position = np.empty(len(refs), np.int64)
        by_position[results["pos"]] = np.arange(len(results["pos"]))
        try:
            for position, ref in enumerate(refs):
                row = by_position[position]
                stats.images += 1
                if error := str(results["error"][row]):
                    note_unreadable(stats, ref, error)
                    yield ref, None
                    continue
                lines = [OcrLine.from_dict(line) for line in json.loads(results["lines"][row])]
                cache.add(str(results["digest"][row]), lines)
                if results["reused"][row]:
                    stats.cached += 1
                else:
                    stats.read += 1
                yield ref, lines
        finally:
            cache.close()

    def _map(
        self,
        label: str,
        fingerprint: str,
        columns: dict[str, list],
        positions: np.ndarray,
        actor: type,
        actor_args: tuple,
        num_gpus: float,
        progress: Progress,
    ) -> dict[str, np.ndarray]:
        """Run `actor` over the rows not finished before; return every row's results.

        `columns` holds the inputs in the order they are sent, `positions` their place in the
        caller's order (the "pos" of each result); "reused" marks the results an earlier run
        finished."""
        ray = require_ray()
        name = label.replace(" ", "-")
        finished = FinishedBatches(self.work / f"{name}-{fingerprint}")
        self._mark_work()
        parts = [{**part, "reused": np.ones(len(part["pos"]), bool)} for part in finished.load()]
        done_positions = {position for part in parts for position in part["pos"].tolist()}
        pending = [i for i, position in enumerate(positions) if position not in done_positions]
        self.stats.reused += len(positions) - len(pending)
        self.stats.computed += len(pending)
        self.stats.maps.append(label)
        if pending:
            rows = [
                {"pos": int(positions[i]), **{key: values[i] for key, values in columns.items()}}
                for i in pending
            ]
            pool = self._pool_size(num_gpus)
            dataset = ray.data.from_items(rows).map_batches(
                actor,
                fn_constructor_args=actor_args,
                batch_size=self.batch_size,
                batch_format="numpy",
                # From one actor up: a pool that loses a node goes on with the actors it has left.
                compute=ray.data.ActorPoolStrategy(min_size=1, max_size=pool),
                num_cpus=1,
                num_gpus=num_gpus,
            )
            batches = dataset.iter_batches(batch_size=None, batch_format="numpy")
            total = -(-len(pending) // self.batch_size)
            for batch in progress(batches, f"{label} (ray)", total):
                written = finished.save(batch)
                parts.append({**written, "reused": np.zeros(len(written["pos"]), bool)})
        if not parts:  # nothing to map (a corpus without images has no image vectors)
            return {"pos": np.empty(0, np.int64), "reused": np.empty(0, bool)}
        results = {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}
        assert len(results["pos"]) >= len(positions)
        return results

    def _mark_work(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        (self.work / WORK_MARKER).touch()

    def discard_work(self) -> None:
        """Delete the finished batches once the index holds them; only a folder we made."""
        if (self.work / WORK_MARKER).is_file():
            shutil.rmtree(self.work)

    def summary(self) -> str:
        reused = (
            f", {self.stats.reused} of {self.stats.reused + self.stats.computed} items taken "
            "from an interrupted build's finished batches"
            if self.stats.reused
            else ""
        )
        return (
            f"ray: {self.shape}; {', '.join(self.stats.maps) or 'no maps'} on the cluster{reused}"
        )
