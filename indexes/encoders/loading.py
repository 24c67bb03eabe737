"""Load each encoder once per process: models are large and every request shares them."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from mmrag.indexes.encoders.base import (
    PROBE_TEXT,
    EncoderInfo,
    TextEncoder,
    pick_device,
    thread_limit,
)
from mmrag.indexes.encoders.clip import ClipEncoder, load_clip
from mmrag.indexes.encoders.onnx_text import load_onnx_encoder
from mmrag.indexes.encoders.text import SentenceTransformerEncoder, resolve_text_embedder
from mmrag.indexes.errors import IndexFormatError

PROBE_AGREEMENT = 0.99


def text_encoder(name_or_path: str, device: str | None = None) -> TextEncoder:
    """On CPU, a local sentence-transformers folder runs from its ONNX export (no torch on a
    question's path); on a GPU, or for a model the export cannot reproduce, on
    sentence-transformers. One per model and device in a process, however it is called."""
    return _text_encoder(name_or_path, device)


@lru_cache(maxsize=4)
def _text_encoder(name_or_path: str, device: str | None) -> TextEncoder:
    location = Path(resolve_text_embedder(name_or_path))
    if pick_device(device) == "cpu" and location.is_dir():
        fast = load_onnx_encoder(name_or_path, location, threads=thread_limit())
        if fast is not None:
            return fast
    return SentenceTransformerEncoder(name_or_path, device=device)


@lru_cache(maxsize=4)
def clip_encoder(
    name_or_path: str, backend: str = "transformers", device: str | None = None
) -> ClipEncoder:
    return load_clip(name_or_path, backend=backend, device=device)


def encoder_for(info: EncoderInfo, device: str | None = None):
    if info.kind == "text":
        return text_encoder(info.name, device)
    return clip_encoder(info.name, info.backend, device)


def probe_vector(encoder) -> list[float]:
    return [round(float(x), 5) for x in encoder.encode_texts([PROBE_TEXT])[0]]


def check_same_encoder(built_with: EncoderInfo, probe: list[float], encoder) -> None:
    """Refuse to search vectors with an encoder other than the one that made them."""
    if encoder.info.dim != built_with.dim:
        raise IndexFormatError(
            f"index vectors come from {built_with.name!r} ({built_with.dim}-d); the query encoder "
            f"{encoder.info.name!r} makes {encoder.info.dim}-d vectors"
        )
    agreement = float(
        np.dot(np.asarray(probe, dtype=np.float32), encoder.encode_texts([PROBE_TEXT])[0])
    )
    if agreement < PROBE_AGREEMENT:
        raise IndexFormatError(
            f"index vectors come from {built_with.name!r}; the query encoder "
            f"{encoder.info.name!r} embeds differently (probe cosine {agreement:.3f}): "
            "rebuild the index or query with the encoder it was built with"
        )
