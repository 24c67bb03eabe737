"""What every encoder promises: L2-normalised float32 rows, and an identity for manifests."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np

# Embedded at build and compared at load: same name with other weights is caught too.
PROBE_TEXT = "a red door of an inn beside the harbour"


@dataclass(frozen=True)
class EncoderInfo:
    kind: str  # "text" (sentence-transformers) or "clip"
    name: str  # hub name or local path, as the user gave it
    backend: str
    dim: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class TextEncoder(Protocol):
    info: EncoderInfo

    def encode_texts(self, texts: list[str]) -> np.ndarray: ...


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def quiet_model_loading() -> None:
    """transformers draws a "Loading weights" bar per model; a CLI's stderr is for our errors."""
    from transformers.utils import logging

    logging.disable_progress_bar()


def pick_device(device: str | None) -> str:
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
