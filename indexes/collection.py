"""An index directory: the source store, its components (BM25 now, dense later), a manifest.

Build streams the corpus once: each source goes to the store and its text to the BM25
tokenizer as it passes, so memory holds token ids and the id set, not the corpus.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from indexes.atomic import atomic_directory
from indexes.bm25 import BM25_DIR, BM25Index, BM25Params
from indexes.corpus import CorpusStats, read_corpus
from indexes.corpus.reader import corpus_format
from indexes.dense import DENSE_DIR, DenseIndex
from indexes.dense_build import Progress, build_dense
from indexes.encoders.base import TextEncoder
from indexes.encoders.clip import ClipEncoder
from indexes.errors import CorpusError, IndexFormatError
from indexes.images import DirectoryImageStore, ImageStore, WebQAImageStore
from indexes.manifest import check_files, describe_files, read_manifest, write_manifest
from indexes.sources import Modality, Source
from indexes.store import STORE_DIR, SourceStore, SourceStoreWriter


def mmrag_version() -> str:
    try:
        return version("mmrag")
    except PackageNotFoundError:
        return "unknown"


@dataclass
class BuildReport:
    path: Path
    sources: dict[str, int]
    duplicates: int
    seconds: float
    bytes: int = 0
    components: list[str] = field(default_factory=list)

    def summary(self) -> str:
        counts = ", ".join(f"{n} {m}" for m, n in sorted(self.sources.items()))
        return (
            f"indexed {sum(self.sources.values())} sources ({counts}; "
            f"{self.duplicates} duplicates skipped) into {self.path} "
            f"[{', '.join(self.components)}; {self.bytes / 1e6:.1f} MB] in {self.seconds:.1f} s"
        )


def _image_config(images: Path | None, corpora: Sequence[Path], out: Path) -> dict[str, Any] | None:
    """Where image bytes live, relative to the index when possible so both can move together."""
    if images is not None:
        if not images.is_file():
            raise CorpusError(f"{images}: no such file (expected WebQA imgs.tsv)")
        lineidx = images.with_suffix(".lineidx")
        if not lineidx.is_file():
            raise CorpusError(f"{lineidx}: no such file (imgs.lineidx must sit beside imgs.tsv)")
        return {"kind": "webqa_tsv", "path": os.path.relpath(images.resolve(), out.resolve())}
    jsonl = [path for path in corpora if path.suffix == ".jsonl"]
    if jsonl:
        return {
            "kind": "directory",
            "path": os.path.relpath(jsonl[0].resolve().parent, out.resolve()),
        }
    return None


def check_build_inputs(
    corpora: Sequence[str | Path], out: str | Path, images: str | Path | None
) -> tuple[list[Path], Path, dict[str, Any] | None]:
    """Fail on missing or unknown inputs before anything slow (model loads, parsing) starts."""
    paths = [Path(path) for path in corpora]
    if not paths:
        raise CorpusError("no corpus given")
    for path in paths:
        corpus_format(path)
        if not path.is_file():
            raise CorpusError(f"{path}: no such file")
    out = Path(out)
    return paths, out, _image_config(Path(images) if images else None, paths, out)


def build_index(
    corpora: Sequence[str | Path],
    out: str | Path,
    *,
    images: str | Path | None = None,
    bm25: BM25Params | None = None,
    text_embedder: TextEncoder | None = None,
    clip: ClipEncoder | None = None,
    dense_factory: str = "auto",
    progress: Callable[[Iterator[Source]], Iterator[Source]] = lambda it: it,
    encode_progress: Progress = lambda items, label, total: items,
) -> BuildReport:
    """Build in a temp directory, then rename it into place: a crash never leaves half an index."""
    started = time.perf_counter()
    corpora, out, image_config = check_build_inputs(corpora, out, images)
    stats = CorpusStats()
    with atomic_directory(out) as tmp:
        writer = SourceStoreWriter(tmp)

        def texts() -> Iterator[str]:
            for source in progress(read_corpus(corpora, stats)):
                writer.add(source)
                yield source.search_text

        index = BM25Index.build(texts(), bm25)
        writer.close()
        if stats.total == 0:
            raise CorpusError(f"{', '.join(map(str, corpora))}: no sources found")
        index.save(tmp)
        dense = build_dense(
            tmp,
            SourceStore(tmp),
            text_embedder=text_embedder,
            clip=clip,
            images=_open_images(tmp, image_config),
            factory=dense_factory,
            progress=encode_progress,
        )
        write_manifest(
            tmp,
            {
                "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "mmrag_version": mmrag_version(),
                "corpus": [str(path) for path in corpora],
                "sources": {"total": stats.total, **stats.by_modality},
                "images": image_config,
                "store": {"files": describe_files(tmp, STORE_DIR)},
                "components": {
                    "bm25": {
                        "params": asdict(index.params),
                        "files": describe_files(tmp, BM25_DIR),
                    },
                    **{f"dense/{name}": entry for name, entry in dense.items()},
                },
            },
        )
        size = sum(p.stat().st_size for p in tmp.rglob("*") if p.is_file())
    return BuildReport(
        path=out,
        sources=dict(stats.by_modality),
        duplicates=stats.duplicates,
        seconds=time.perf_counter() - started,
        bytes=size,
        components=["bm25", *(f"dense/{name}" for name in dense)],
    )


class Collection:
    """A loaded index directory. Heavy parts are memory-mapped; load is fast and read-only."""

    def __init__(self, root: str | Path, *, verify: bool = False) -> None:
        self.root = Path(root)
        self.manifest = read_manifest(self.root)
        check_files(self.root, self.manifest["store"]["files"], checksums=verify)
        self.store = SourceStore(self.root)
        components = self.manifest.get("components", {})
        if "bm25" not in components:
            raise IndexFormatError(f"{self.root}: index has no BM25 component")
        check_files(self.root, components["bm25"]["files"], checksums=verify)
        self.bm25 = BM25Index.load(self.root)
        if self.bm25.params != BM25Params(**components["bm25"]["params"]):
            raise IndexFormatError(f"{self.root}: BM25 parameters disagree with the manifest")
        self._images: ImageStore | None = None
        self._dense: dict[str, DenseIndex] = {}
        self.dense_components = {
            name.removeprefix("dense/"): entry
            for name, entry in components.items()
            if name.startswith("dense/")
        }
        for entry in self.dense_components.values():
            check_files(self.root, entry["files"], checksums=verify)

    def rows(self, modality: Modality | None) -> Any:
        return None if modality is None else self.store.rows_by_modality[modality]

    @property
    def images(self) -> ImageStore | None:
        """Opened on first use: search never needs image bytes, only serving and encoding do."""
        if self._images is None:
            self._images = _open_images(self.root, self.manifest.get("images"))
        return self._images

    def dense(self, name: str, device: str | None = None) -> DenseIndex:
        """A dense component ("text-image", "text-text", "clip-image"), loaded on first use.

        On a CUDA device the vectors move to the GPU for exact torch search.
        """
        if name not in self.dense_components:
            built = ", ".join(self.dense_components) or "none"
            raise IndexFormatError(f"{self.root}: no dense component {name!r} (built: {built})")
        if name not in self._dense:
            index = DenseIndex.load(self.root / DENSE_DIR / name)
            if device and device.startswith("cuda"):
                index.use_torch(device)
            self._dense[name] = index
        return self._dense[name]

    @property
    def has_clip(self) -> bool:
        return "clip-image" in self.dense_components


def _open_images(root: Path, config: dict[str, Any] | None) -> ImageStore | None:
    if not config:
        return None
    path = (root / config["path"]).resolve()
    if config["kind"] == "webqa_tsv":
        return WebQAImageStore(path)
    return DirectoryImageStore(path)
