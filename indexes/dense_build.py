"""Encode a built store into dense components: text embedder per modality and over the text read
in images ("text-ocr", only rows that have some), CLIP over images."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mmrag.indexes.dense import DENSE_DIR, DenseIndex
from mmrag.indexes.encoders.base import TextEncoder
from mmrag.indexes.encoders.clip import ClipEncoder
from mmrag.indexes.encoders.loading import probe_vector
from mmrag.indexes.errors import CorpusError
from mmrag.indexes.executor import BuildExecutor, LocalExecutor, Progress, no_progress
from mmrag.indexes.images import ImageStore
from mmrag.indexes.manifest import describe_files
from mmrag.indexes.sources import OCR, Modality, Source
from mmrag.indexes.store import SourceStore


def component_name(kind: str, modality: str) -> str:
    return f"{kind}-{modality}"


def _search_text(source: Source) -> str:
    return source.search_text


def _ocr_text(source: Source) -> str:
    return source.ocr_text


def build_dense(
    root: Path,
    store: SourceStore,
    *,
    text_embedder: TextEncoder | None,
    clip: ClipEncoder | None,
    images: ImageStore | None,
    factory: str = "auto",
    progress: Progress = no_progress,
    executor: BuildExecutor | None = None,
    unreadable: set[str] | None = None,
) -> dict[str, Any]:
    """Write every dense component under root/dense; return their manifest entries.

    References of images CLIP could not decode are added to `unreadable`, when given. A store
    with OCR lines gets "text-ocr" vectors of the images that have text.
    """
    plans: list[tuple[str, Any, Modality | str]] = []
    if text_embedder is not None:
        plans += [("text", text_embedder, "image"), ("text", text_embedder, "text")]
        if store.ocr_offsets is not None:
            plans.append(("text", text_embedder, OCR))
    if clip is not None:
        if images is None:
            raise CorpusError(
                "CLIP image vectors need the images: pass --images (or use --no-clip)"
            )
        plans.append(("clip", clip, "image"))
    unreadable = set() if unreadable is None else unreadable
    executor = executor or LocalExecutor()
    components: dict[str, Any] = {}
    for kind, encoder, modality in plans:
        name = component_name(kind, modality)
        rows = store.rows_with_ocr() if modality == OCR else store.rows_by_modality[modality]
        if kind == "clip":
            refs = [store.get(int(row)).image_ref or "" for row in rows]
            vectors, decoded = executor.image_vectors(encoder, images, refs, progress)
            unreadable.update(ref for ref, ok in zip(refs, decoded, strict=True) if not ok)
        else:
            text_of = _ocr_text if modality == OCR else _search_text
            texts = [text_of(store.get(int(row))) for row in rows]
            vectors = executor.text_vectors(encoder, texts, progress, f"{name} vectors")
        index = DenseIndex.build(vectors, rows, encoder.info, factory)
        folder = root / DENSE_DIR / name
        index.save(folder, vectors)
        components[name] = {
            **index.describe(),
            "probe": probe_vector(encoder),
            "files": describe_files(root, f"{DENSE_DIR}/{name}"),
        }
    return components
