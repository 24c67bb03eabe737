"""Decode and preprocess images in worker threads while the encoder works on the last batch.

JPEG decoding and resizing release the GIL in Pillow, so threads keep several cores busy
without pickling pixels between processes. Batches come back in input order, at most
`workers * 2` ahead, so memory stays bounded on a 390K-image run.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from PIL import Image

from mmrag.indexes.errors import InputError
from mmrag.indexes.images import ImageStore, decode_image

BLANK = Image.new("RGB", (32, 32))


def load_or_blank(store: ImageStore, ref: str) -> tuple[Image.Image, bool]:
    """An undecodable image becomes a blank one, flagged, so one bad file never stops a build."""
    try:
        return decode_image(store.read_bytes(ref)), True
    except InputError:
        return BLANK, False


def prefetch_batches(
    store: ImageStore,
    refs: Sequence[str],
    preprocess: Callable[[list[Image.Image]], np.ndarray],
    *,
    batch_size: int = 64,
    workers: int = 4,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (pixels, ok) per batch: preprocessed pixels and which images decoded."""

    def job(start: int) -> tuple[np.ndarray, np.ndarray]:
        loaded = [load_or_blank(store, ref) for ref in refs[start : start + batch_size]]
        return preprocess([image for image, _ in loaded]), np.array([ok for _, ok in loaded])

    starts = iter(range(0, len(refs), batch_size))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="image-prefetch") as pool:
        pending = deque(pool.submit(job, start) for start in itertools.islice(starts, workers * 2))
        while pending:
            yield pending.popleft().result()
            start = next(starts, None)
            if start is not None:
                pending.append(pool.submit(job, start))
