"""A user's own photo as source [1] of an answer: the text OCR reads in it is the evidence.

`mmrag ask --image` and `/v1/answer` with an uploaded image share this: the image is decoded
under the service's pixel limit (a bad one is an InputError, so a 4xx or one line), read by
PP-OCR, and handed to the pipeline as a source that comes first; retrieved sources follow.
Engines that see images get its bytes as well (`components.image_bytes`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import xxhash

from mmrag.indexes.images import decode_image
from mmrag.indexes.ocr.reader import OcrModels, OcrReader, keep, never
from mmrag.indexes.sources import Source

UPLOAD_TITLE = "Your image"
# Lines of an attached photo that are read: its tallest, the text a question about it asks for.
# More than fit a small model's prompt (MAX_OCR_CHARS), and each costs about 40 ms on 2 cores.
MAX_ATTACHED_LINES = 100


@dataclass(frozen=True, slots=True)
class AttachedImage(Source):
    """An image that is not in the index: its bytes travel with it, and how long reading it
    took, which the answer's timings report."""

    data: bytes = b""
    ocr_s: float = 0.0


class ImageAttacher:
    """Turns image bytes into an `AttachedImage`; the OCR model loads on the first image."""

    def __init__(self, models: OcrModels, *, min_confidence: float, max_pixels: int) -> None:
        models.check()
        self.models = models
        self.min_confidence = min_confidence
        self.max_pixels = max_pixels
        self._reader: OcrReader | None = None
        self._lock = threading.Lock()

    def reader(self) -> OcrReader:
        with self._lock:
            if self._reader is None:
                self._reader = OcrReader(self.models)
            return self._reader

    def attach(self, data: bytes, *, stop: Callable[[], bool] = never) -> AttachedImage:
        """The image with the lines read before `stop()` turned true (a request's deadline)."""
        image = decode_image(data, self.max_pixels)  # CorruptImage before any model loads
        started = time.perf_counter()
        read = self.reader().read(image, max_lines=MAX_ATTACHED_LINES, stop=stop)
        lines = keep(read, self.min_confidence)
        return AttachedImage(
            id=f"upload-{xxhash.xxh3_64_hexdigest(data)}",
            modality="image",
            title=UPLOAD_TITLE,
            text="",
            ocr=tuple(lines),
            data=data,
            ocr_s=time.perf_counter() - started,
        )
