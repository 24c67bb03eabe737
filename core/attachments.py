"""A user's own photo as source [1] of an answer: the text OCR reads in it is the evidence.

`mmrag ask --image` and `/v1/answer` with an uploaded image share this: the image is decoded
under the service's pixel limit (a bad one is an InputError, so a 4xx or one line), read by
PP-OCR, and handed to the pipeline as a source that comes first; retrieved sources follow.
Engines that see images get its bytes as well (`components.image_bytes`).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import xxhash

from mmrag.indexes.images import decode_image
from mmrag.indexes.ocr.reader import OcrModels, OcrReader, keep, never
from mmrag.indexes.sources import Source

UPLOAD_TITLE = "Your image"
# Lines of an attached photo that are read: its tallest, the text a question about it asks for.
# More than fit a small model's prompt (MAX_OCR_CHARS), and each costs about 40 ms on 2 cores.
MAX_ATTACHED_LINES = 100
# How much less CPU priority a photo's reading has than the answers running beside it.
OCR_NICENESS = 10


def lower_priority() -> None:
    """Lower the calling thread's CPU priority by OCR_NICENESS (Linux, where it is per thread
    and the threads it starts inherit it; elsewhere nothing changes)."""
    if sys.platform == "linux":
        thread = threading.get_native_id()
        niceness = os.getpriority(os.PRIO_PROCESS, thread) + OCR_NICENESS
        os.setpriority(os.PRIO_PROCESS, thread, min(19, niceness))


@dataclass(frozen=True, slots=True)
class AttachedImage(Source):
    """An image that is not in the index: its bytes travel with it, and how long reading it
    took, which the answer's timings report."""

    data: bytes = b""
    ocr_s: float = 0.0


class ImageAttacher:
    """Turns image bytes into an `AttachedImage`; the OCR model loads on the first image.

    Photos are read on threads of their own at a lower CPU priority, as are the threads
    onnxruntime starts for the model (loaded on them). On 2 cores, a text question asked while
    a photo was read took 10 s instead of 3.4 s: llama.cpp's threads wait for each other at
    every step of a prompt, so each time the reading took a core from one of them, both
    waited. The answers beside a reading now come first, and it takes the cores they leave.
    """

    def __init__(self, models: OcrModels, *, min_confidence: float, max_pixels: int) -> None:
        models.check()
        self.models = models
        self.min_confidence = min_confidence
        self.max_pixels = max_pixels
        self._reader: OcrReader | None = None
        self._lock = threading.Lock()
        self._threads = ThreadPoolExecutor(thread_name_prefix="ocr", initializer=lower_priority)

    def reader(self) -> OcrReader:
        with self._lock:
            if self._reader is None:
                self._reader = self._threads.submit(OcrReader, self.models).result()
            return self._reader

    def attach(self, data: bytes, *, stop: Callable[[], bool] = never) -> AttachedImage:
        """The image with the lines read before `stop()` turned true (a request's deadline)."""
        image = decode_image(data, self.max_pixels)  # CorruptImage before any model loads
        started = time.perf_counter()
        reader = self.reader()
        reading = self._threads.submit(reader.read, image, max_lines=MAX_ATTACHED_LINES, stop=stop)
        read = reading.result()
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
