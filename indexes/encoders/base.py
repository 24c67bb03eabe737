"""What every encoder promises: L2-normalised float32 rows, and an identity for manifests."""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
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
    """The device asked for, else cuda where torch sees a GPU. A machine with no GPU driver is
    "cpu" without asking torch: importing it takes 2 s on 2 cores, and the CPU path needs none."""
    if device:
        return device
    driver = Path("/proc/driver/nvidia").exists() or Path("/dev/kfd").exists()
    if not driver and "torch" not in sys.modules:
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def limit_threads(count: int | None) -> None:
    """Cap the cores this process's encoders use (onnxruntime, and torch whenever it loads):
    each Ray worker and each of `serve --workers` gets its share rather than every core."""
    if not count:
        return
    os.environ["OMP_NUM_THREADS"] = str(count)  # torch takes it when it loads
    if (torch := sys.modules.get("torch")) is not None:
        torch.set_num_threads(count)


def thread_limit() -> int | None:
    """OMP_NUM_THREADS: set by `limit_threads`, by Ray to each worker's CPUs, or by the user
    (torch reads it itself; onnxruntime is told)."""
    try:
        return int(os.environ.get("OMP_NUM_THREADS", "")) or None
    except ValueError:
        return None
