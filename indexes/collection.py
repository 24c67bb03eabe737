"""An index directory: the source store, its components (BM25, dense), a manifest.

Build streams the corpus once: each source goes to the store and its text to the BM25
tokenizer as it passes, so memory holds token ids and the id set, not the corpus. The new
directory replaces only an mmrag index or an empty directory unless forced: `--out` naming
someone's folder must not delete it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from mmrag.indexes.atomic import atomic_directory
from mmrag.indexes.bm25 import BM25_DIR, OCR_BM25_DIR, BM25Index, BM25Params
from mmrag.indexes.corpus import CorpusStats, read_corpus
from mmrag.indexes.corpus.reader import DuplicatePolicy, corpus_format
from mmrag.indexes.dense import DENSE_DIR, DenseIndex
from mmrag.indexes.dense_build import build_dense
from mmrag.indexes.encoders.base import TextEncoder
from mmrag.indexes.encoders.clip import ClipEncoder
from mmrag.indexes.errors import CorpusError, IndexFormatError, InputError
from mmrag.indexes.executor import BuildExecutor, LocalExecutor, Progress, no_progress
from mmrag.indexes.images import ImageStore, open_image_store
from mmrag.indexes.manifest import (
    check_index_files,
    describe_files,
    is_index,
    read_manifest,
    write_manifest,
)
from mmrag.indexes.ocr.build import OcrOptions, build_ocr
from mmrag.indexes.outputs import Output, check_output_path
from mmrag.indexes.sources import Source
from mmrag.indexes.store import STORE_DIR, SourceStore, SourceStoreWriter

CAPTIONS_ONLY = "none: no CLIP checkpoint configured, images are reached through their captions"


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
    unreadable_images: int = 0
    ocr: dict[str, Any] | None = None  # the manifest's OCR summary, when built with OCR
    warnings: list[str] = field(default_factory=list)  # what the build changed in its input

    def summary(self) -> str:
        counts = ", ".join(f"{n} {m}" for m, n in sorted(self.sources.items()))
        unreadable = (
            f"; {self.unreadable_images} images unreadable" if self.unreadable_images else ""
        )
        ocr = ""
        if self.ocr:
            ocr = (
                f"; OCR: text in {self.ocr['images_with_text']} of {self.ocr['images']} images, "
                f"{self.ocr['lines']} lines ({self.ocr['read']} read, {self.ocr['cached']} "
                f"cached, {self.ocr['unreadable']} unreadable) in {self.ocr['seconds']:.1f} s"
            )
        return (
            f"indexed {sum(self.sources.values())} sources ({counts}; "
            f"{self.duplicates} duplicates skipped{unreadable}{ocr}) into {self.path} "
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


INDEX = Output("an mmrag index", directory=True, ours=is_index)


def check_output(out: Path, corpora: Sequence[Path], images: Path | None, *, force: bool) -> None:
    """Replace only an mmrag index (any version) or an empty directory, unless forced; and
    never a directory holding the build's own inputs, which the swap would delete."""
    inputs = [("--corpus", path) for path in corpora]
    if images is not None:
        inputs.append(("--images", images))
    check_output_path(out, INDEX, inputs, force=force)


def check_build_inputs(
    corpora: Sequence[str | Path],
    out: str | Path,
    images: str | Path | None,
    *,
    force: bool = False,
) -> tuple[list[Path], Path, dict[str, Any] | None]:
    """Fail on missing or unknown inputs, or an --out not ours to replace, before anything
    slow (model loads, parsing) starts."""
    paths = [Path(path) for path in corpora]
    if not paths:
        raise CorpusError("no corpus given")
    for path in paths:
        corpus_format(path)
        if not path.is_file():
            raise CorpusError(f"{path}: no such file")
    out = Path(out)
    image_path = Path(images) if images else None
    check_output(out, paths, image_path, force=force)
    return paths, out, _image_config(image_path, paths, out)


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
    encode_progress: Progress = no_progress,
    ocr: OcrOptions | None = None,
    ocr_progress: Progress = no_progress,
    force: bool = False,
    executor: BuildExecutor | None = None,
    on_duplicate: DuplicatePolicy = "error",
) -> BuildReport:
    """Build in a temp directory, then swap it into place: a crash never leaves half an index.

    A source id given again with other content is an error naming both, unless
    `on_duplicate="first"` (`read_corpus`); titles and texts past what an index keeps are cut,
    which `BuildReport.warnings` says.

    Every image is probed as its source streams past (see `indexes.images`); one that is
    missing or corrupt is counted, not fatal, and CLIP's and OCR's decode failures join the
    count. With `ocr`, the text in every image is read (`indexes.ocr.build`) after the corpus
    pass, through a cache beside the index that lets a killed build resume. The vectors and
    the OCR are computed by `executor` (here by default; `RayExecutor` for a cluster).
    """
    started = time.perf_counter()
    executor = executor or LocalExecutor()
    image_path = Path(images) if images else None
    corpora, out, image_config = check_build_inputs(corpora, out, image_path, force=force)
    stats = CorpusStats()
    unreadable: set[str] = set()

    def recheck() -> None:
        check_output(out, corpora, image_path, force=force)

    with atomic_directory(out, before_swap=recheck) as tmp:
        writer = SourceStoreWriter(tmp)
        image_store = open_image_store(tmp, image_config)

        def texts() -> Iterator[str]:
            for source in progress(read_corpus(corpora, stats, on_duplicate=on_duplicate)):
                writer.add(source)
                if image_store is not None and source.image_ref is not None:
                    try:
                        image_store.probe(source.image_ref)
                    except InputError:
                        unreadable.add(source.image_ref)
                yield source.search_text

        index = BM25Index.build(texts(), bm25)
        writer.close()
        if stats.total == 0:
            raise CorpusError(f"{', '.join(map(str, corpora))}: no sources found")
        index.save(tmp)
        ocr_entries: dict[str, Any] = {}
        if ocr is not None:
            if image_store is None:
                raise CorpusError("OCR reads the images: pass --images (or a JSONL corpus)")
            ocr_entries, failed = build_ocr(
                tmp,
                SourceStore(tmp),
                image_store,
                ocr,
                index.params,
                executor,
                progress=ocr_progress,
            )
            unreadable.update(failed)
        dense = build_dense(
            tmp,
            SourceStore(tmp),
            text_embedder=text_embedder,
            clip=clip,
            images=image_store,
            factory=dense_factory,
            progress=encode_progress,
            executor=executor,
            unreadable=unreadable,
        )
        write_manifest(
            tmp,
            {
                "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "mmrag_version": mmrag_version(),
                "corpus": [str(path) for path in corpora],
                "sources": {"total": stats.total, **stats.by_modality},
                "images": image_config and {**image_config, "unreadable": len(unreadable)},
                "store": {"files": describe_files(tmp, STORE_DIR)},
                **({"ocr": ocr_entries["ocr"]} if ocr_entries else {}),
                "components": {
                    "bm25": {
                        "params": asdict(index.params),
                        "files": describe_files(tmp, BM25_DIR),
                    },
                    **({OCR_BM25_DIR: ocr_entries[OCR_BM25_DIR]} if ocr_entries else {}),
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
        components=[
            "bm25",
            *([OCR_BM25_DIR] if ocr_entries else []),
            *(f"dense/{name}" for name in dense),
        ],
        unreadable_images=len(unreadable),
        ocr=ocr_entries.get("ocr"),
        warnings=stats.warnings(),
    )


class Collection:
    """A loaded index directory. Heavy parts are memory-mapped; load is fast and read-only.

    Every file the manifest lists is checked against its digest first (about 0.1 s per GB
    in the page cache, 0.3 s per GB from disk: docs/BENCHMARKS.md), so a corrupt index fails
    here with one line naming the file, not later in a search. `verify=False` checks sizes
    only; it exists for bench/verify.py, which measures what the digests add to a load.
    """

    def __init__(self, root: str | Path, *, verify: bool = True) -> None:
        self.root = Path(root)
        self.manifest = read_manifest(self.root)
        components = self.manifest.get("components", {})
        if "bm25" not in components:
            raise IndexFormatError(f"{self.root}: index has no BM25 component")
        check_index_files(self.root, self.manifest, checksums=verify)
        self.store = SourceStore(self.root)
        self.bm25 = BM25Index.load(self.root)
        if self.bm25.params != BM25Params(**components["bm25"]["params"]):
            raise IndexFormatError(f"{self.root}: BM25 parameters disagree with the manifest")
        # BM25 over the text read in images, when the index was built with --ocr.
        self.ocr_bm25 = (
            BM25Index.load(self.root, name=OCR_BM25_DIR) if OCR_BM25_DIR in components else None
        )
        self._images: ImageStore | None = None
        self._dense: dict[str, DenseIndex] = {}
        self.dense_components = {
            name.removeprefix("dense/"): entry
            for name, entry in components.items()
            if name.startswith("dense/")
        }

    @property
    def images(self) -> ImageStore | None:
        """Opened on first use: search never needs image bytes, only serving and encoding do."""
        if self._images is None:
            self._images = open_image_store(self.root, self.manifest.get("images"))
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

    @property
    def image_vectors(self) -> str:
        """How images are searched, as `index stats` and /healthz say it."""
        return "clip" if self.has_clip else CAPTIONS_ONLY

    @property
    def ocr(self) -> dict[str, Any] | None:
        """The build's OCR summary (images read, with text, lines kept), or None without."""
        return self.manifest.get("ocr")
