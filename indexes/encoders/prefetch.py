"""Decode and preprocess images in worker threads while the encoder works on the last batch.

JPEG decoding and resizing release the GIL in Pillow, so threads keep several cores busy
without pickling pixels between processes. Batches come back in input order, at most
`workers * 2` ahead, so memory stays bounded on a 390K-image run. An encoder with a GPU image
pipeline (`gpu_images`, on CUDA hosts) gets each batch's bytes decoded and preprocessed on the
device instead (`mmrag.indexes.encoders.gpu_images`).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image

from mmrag.indexes.errors import InputError
from mmrag.indexes.images import ImageStore, decode_image

if TYPE_CHECKING:
    from mmrag.indexes.encoders.clip import ClipEncoder

BLANK = Image.new("RGB", (32, 32))


def load_or_blank(
    store: ImageStore, ref: str, data: bytes | None = None
) -> tuple[Image.Image, bool]:
    """An undecodable image becomes a blank one, flagged, so one bad file never stops a build.
    `data` is the image's bytes where the caller has read them already."""
    try:
        return decode_image(store.read_bytes(ref) if data is None else data), True
    except InputError:
        return BLANK, False


def batch_pixels(
    clip: ClipEncoder, store: ImageStore, refs: Sequence[str]
) -> tuple[Any, np.ndarray]:
    """One batch's model input and which images decoded: from the bytes on the device where
    the encoder has a GPU image pipeline, else decoded by Pillow and preprocessed by the
    encoder's processor. (An encoder without the attribute is a CPU one.)"""
    gpu = getattr(clip, "gpu_images", None)
    if gpu is not None:
        return gpu.pixels(store, refs)
    loaded = [load_or_blank(store, ref) for ref in refs]
    return clip.preprocess([image for image, _ in loaded]), np.array([ok for _, ok in loaded])


def prefetch_batches(
    store: ImageStore,
    refs: Sequence[str],
    clip: ClipEncoder,
    *,
    batch_size: int = 64,
    workers: int = 4,
) -> Iterator[tuple[Any, np.ndarray]]:
    """Yield (pixels, ok) per batch: `clip`'s model input and which images decoded."""

    def job(start: int) -> tuple[Any, np.ndarray]:
        return batch_pixels(clip, store, refs[start : start + batch_size])

    starts = iter(range(0, len(refs), batch_size))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="image-prefetch") as pool:
        pending = deque(pool.submit(job, start) for start in itertools.islice(starts, workers * 2))
        while pending:
            yield pending.popleft().result()
            start = next(starts, None)
            if start is not None:
                pending.append(pool.submit(job, start))
