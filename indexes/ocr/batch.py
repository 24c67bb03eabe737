"""OCR over many images: batched, parallel across processes, resumable through the cache.

PP-OCR costs about a second per photo on one core and onnxruntime's own threads scale poorly
over small images, so each core gets a process of its own (one onnxruntime thread each), started
with `spawn` (the parent may hold torch and its threads, which `fork` would copy mid-state).
Images go out in rounds of `batch_size` per worker, one image per task so a slow photo does not
hold up a batch; the parent reads the bytes, skips what the cache holds, records each result in
the cache as it arrives and yields results in input order. Ctrl-C stops the run between two
images (a KeyboardInterrupt raised inside the model's C code, or in some object's __del__,
could be lost): workers ignore SIGINT, queued images are cancelled, and at most the image in
flight per worker is read again by the next run.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import xxhash

from mmrag.indexes.errors import InputError
from mmrag.indexes.images import MAX_IMAGE_PIXELS, decode_image
from mmrag.indexes.ocr.cache import OcrCache
from mmrag.indexes.ocr.reader import OcrModels, OcrReader
from mmrag.indexes.sources import OcrLine

log = logging.getLogger(__name__)

BATCH_SIZE = 8  # images per worker and round

_READER: OcrReader | None = None  # one per worker process


@dataclass
class OcrRunStats:
    images: int = 0
    cached: int = 0  # found in the cache
    read: int = 0  # read by the OCR model in this run
    unreadable: dict[str, str] = field(default_factory=dict)  # image ref -> why


def _start_worker(models: OcrModels) -> None:
    global _READER
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what Ctrl-C stops
    _READER = OcrReader(models, threads=1)


def read_one(reader: OcrReader, data: bytes, max_pixels: int) -> list[OcrLine] | str:
    """The lines of one image, or why it could not be read. Any failure inside the model on a
    strange image is that image's failure: one photo must never stop a 390K-image build."""
    try:
        return reader.read(decode_image(data, max_pixels))
    except InputError as exc:
        return str(exc)
    except Exception as exc:  # see the docstring
        return f"OCR failed ({type(exc).__name__}: {exc})"


def _read_in_worker(data: bytes, max_pixels: int) -> list[OcrLine] | str:
    assert _READER is not None
    return read_one(_READER, data, max_pixels)


class _Later:
    """A future read when its result is asked for, so results are cached one by one."""

    def __init__(self, reader: OcrReader, data: bytes, max_pixels: int) -> None:
        self.reader, self.data, self.max_pixels = reader, data, max_pixels

    def result(self) -> list[OcrLine] | str:
        return read_one(self.reader, self.data, self.max_pixels)


class _Inline:
    """The pool interface for one worker: read in this process, no start-up cost."""

    def __init__(self, models: OcrModels) -> None:
        self.reader = OcrReader(models)

    def submit(self, _fn: Callable, data: bytes, max_pixels: int) -> _Later:
        return _Later(self.reader, data, max_pixels)

    def shutdown(self, **_: object) -> None:
        pass


def _pool(models: OcrModels, workers: int) -> _Inline | ProcessPoolExecutor:
    models.check()
    if workers <= 1:
        return _Inline(models)
    return ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(models,),
    )


def _rounds(refs: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(refs), size):
        yield refs[start : start + size]


def ocr_images(
    refs: Sequence[str],
    load: Callable[[str], bytes],
    cache: OcrCache,
    *,
    models: OcrModels | None = None,
    workers: int = 1,
    batch_size: int = BATCH_SIZE,
    max_pixels: int = MAX_IMAGE_PIXELS,
    stats: OcrRunStats | None = None,
) -> Iterator[tuple[str, list[OcrLine] | None]]:
    """(ref, raw lines) per image in input order; None for an image that cannot be read,
    which is logged with its reference and counted in `stats.unreadable`."""
    stats = stats if stats is not None else OcrRunStats()
    pool = _pool(models or OcrModels(), workers)
    try:
        with _ctrl_c_between_images() as stop:
            for chunk in _rounds(refs, batch_size * max(workers, 1)):
                yield from _round(chunk, load, cache, pool, max_pixels, stats, stop)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        cache.close()


@contextmanager
def _ctrl_c_between_images() -> Iterator[Callable[[], None]]:
    """Defer SIGINT to the next `stop()` call (main thread only; elsewhere stop() is a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    pressed = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: pressed.set())

    def stop() -> None:
        if pressed.is_set():
            raise KeyboardInterrupt

    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


def _round(
    refs: Sequence[str],
    load: Callable[[str], bytes],
    cache: OcrCache,
    pool: _Inline | ProcessPoolExecutor,
    max_pixels: int,
    stats: OcrRunStats,
    stop: Callable[[], None],
) -> Iterator[tuple[str, list[OcrLine] | None]]:
    digests: list[str | None] = []
    found: dict[str, list[OcrLine] | str] = {}
    futures: dict[str, Future | _Later] = {}
    for ref in refs:
        try:
            data = load(ref)
        except InputError as exc:
            digests.append(None)
            note_unreadable(stats, ref, str(exc))
            continue
        digest = xxhash.xxh3_128_hexdigest(data)
        digests.append(digest)
        if digest in found or digest in futures:
            continue
        cached = cache.get(digest)
        if cached is not None:
            found[digest] = cached
            stats.cached += 1
        else:
            futures[digest] = pool.submit(_read_in_worker, data, max_pixels)
    for digest, future in futures.items():
        stop()
        result = future.result()
        found[digest] = result
        if not isinstance(result, str):
            cache.add(digest, result)
            stats.read += 1
    for ref, digest in zip(refs, digests, strict=True):
        stats.images += 1
        result = None if digest is None else found[digest]
        if isinstance(result, str):
            note_unreadable(stats, ref, result)
            result = None
        yield ref, result


def note_unreadable(stats: OcrRunStats, ref: str, why: str) -> None:
    """Log an image once, with its reference and why, and count it."""
    if ref not in stats.unreadable:
        log.warning("image %s: %s; skipped by OCR", ref, why)
        stats.unreadable[ref] = why
