"""PP-OCR through rapidocr-onnxruntime: the one real vision model that runs offline here.

Its wheel ships PP-OCRv4 detection and recognition models (Chinese + English characters);
other ONNX models can be given by path. Every line is kept with its confidence (rapidocr's own
0.5 cut is turned off) so that a cache of raw lines serves any threshold; `keep` applies the
threshold where text becomes evidence. On a host where onnxruntime has its CUDA provider
(`onnxruntime-gpu`), the models run there.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from mmrag.indexes.errors import InputError
from mmrag.indexes.manifest import file_digest
from mmrag.indexes.sources import OcrLine

PACKAGE = "rapidocr-onnxruntime"
MISSING = f"scene-text OCR needs the {PACKAGE} package: pip install {PACKAGE}"
DEFAULT_MIN_CONFIDENCE = 0.5


@dataclass(frozen=True)
class OcrModels:
    """Detection and recognition ONNX models by path; None: the ones the wheel ships."""

    det: Path | None = None
    rec: Path | None = None

    def check(self) -> None:
        for name, path in (("detection", self.det), ("recognition", self.rec)):
            if path is not None and not Path(path).is_file():
                raise InputError(f"{path}: no such OCR {name} model (an .onnx file)")


def _package() -> Any:
    try:
        import rapidocr_onnxruntime
    except ImportError:
        raise InputError(MISSING) from None
    return rapidocr_onnxruntime


def cuda_available() -> bool:
    import onnxruntime

    return "CUDAExecutionProvider" in onnxruntime.get_available_providers()


def keep(lines: list[OcrLine], min_confidence: float) -> list[OcrLine]:
    """The lines worth citing: confident enough, and with a letter or digit in them (the
    detector also reads stars, arrows and window grids as "text")."""
    return [
        line
        for line in lines
        if line.confidence >= min_confidence and any(ch.isalnum() for ch in line.text)
    ]


# PP-OCR scales an image's long side down to at most DETECTOR_MAX_SIDE pixels, then its detector
# scales the short side up to at least 736 (`Det.limit_side_len`), so an image's shape, not its
# size, set the detector's work: an 8 x 2000 strip became a 736 x 46,016 input (4.7 GB resident,
# 26 s on 2 cores), and a 100 x 399,000 PNG, padded to the detector's grid at full size as the
# last round did, 2.5 gigapixels before PP-OCR scaled it down. PP-OCR's own letterbox caps only
# wide images, so every image is fitted first: scaled to DETECTOR_MAX_SIDE, then padded until
# no side is under 1/MAX_ASPECT of the other. The detector's input is then at most
# 736 x (736 * MAX_ASPECT) pixels (4.3 MP, about 2 s on 2 cores) whatever the upload.
DETECTOR_MAX_SIDE = 2000
MAX_ASPECT = 8  # PP-OCR's `width_height_ratio`: images within it are read as before
# How often a detection in progress asks its reading's `stop()`.
STOP_POLL_S = 0.05


def fitted_for_the_detector(image: Image.Image) -> tuple[Image.Image, float]:
    """The image scaled as PP-OCR would scale it (long side at most DETECTOR_MAX_SIDE), padded
    with white below or to the right to at most MAX_ASPECT to 1, and the scale from the
    original to it: its pixels, and so the boxes of its lines, stay where they were up to that
    scale. A banner is still read; a strip too thin to hold text reads as nothing."""
    width, height = image.size
    scale = min(1.0, DETECTOR_MAX_SIDE / max(width, height))
    if scale < 1.0:
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        image = image.resize(size, Image.Resampling.BILINEAR)
    least = math.ceil(max(image.size) / MAX_ASPECT)
    if min(image.size) < least:
        canvas = Image.new("RGB", (max(image.width, least), max(image.height, least)), "white")
        canvas.paste(image.convert("RGB"), (0, 0))
        image = canvas
    return image, scale


# PP-OCR reads lines in batches of LINE_BATCH crops sorted by aspect ratio, each crop scaled to
# LINE_HEIGHT pixels high and the batch padded to its widest (at least MIN_LINE_WIDTH), so a
# batch's work is its pixels, not its count: four batches of ordinary lines are about 0.6 MP,
# four of lines 250 times as wide as high 14 MP (55.7-58.9 s for a 30 s deadline when a step
# was 24 lines whatever their width). A step of a line stage, between two `stop()` checks, is
# whole batches up to PIXELS_PER_CALL (about a second of recognition on 2 cores), at least one.
LINE_BATCH, LINE_HEIGHT, MIN_LINE_WIDTH = 6, 48, 320
PIXELS_PER_CALL = 4 * LINE_BATCH * LINE_HEIGHT * 480


def never() -> bool:
    return False


class ReadingStopped(Exception):
    """A detection ended early because its reading's `stop()` turned true."""


@contextmanager
def terminated_once(stop: Callable[[], bool]) -> Iterator[Any]:
    """onnxruntime `RunOptions` whose runs a watcher thread ends (`terminate`) within
    STOP_POLL_S of `stop()` turning true; the watcher ends with the block."""
    import onnxruntime

    options, finished = onnxruntime.RunOptions(), threading.Event()

    def watch() -> None:
        while not finished.wait(STOP_POLL_S):
            if stop():
                options.terminate = True
                return

    watcher = threading.Thread(target=watch, name="ocr-stop", daemon=True)
    watcher.start()
    try:
        yield options
    finally:
        finished.set()
        watcher.join()


class Stages:
    """PP-OCR's stages, made to stop and to share: detection ends within STOP_POLL_S of
    `stop()` turning true, and the per-line stages (direction classifier, recogniser) run in
    slices of crops, so that a reading can be stopped between slices and capped in how many
    lines it reads.

    After detection, the time a reading takes grows with its lines: a 2000 x 2000 upload dense
    with words had 664, 2 s to detect and 25 s more to recognise. The slices keep PP-OCR's own
    batches (crops sorted by aspect ratio, then taken six at a time), so a line reads the same
    as in one call. Lines not read are left empty, which `OcrReader.read` drops.

    Readings run at once, each with its cap and `stop` in its own thread (PP-OCR's stages keep
    no state between calls but the detector's resize rule, which every call sets alike). Only
    the detector takes one image at a time: a run over 4 MP holds about 730 MB, so two at once
    took a server past 2 GB. It is held for one run (about 2 s on 2 cores), and a reading that
    waits for it, or runs it, stops there when its `stop()` turns true. A reading of many lines
    (a shared lock once held it whole, 14.5 s) no longer keeps the next photo waiting.
    """

    def __init__(self, engine: Any) -> None:
        self.detection = engine.text_det.infer
        self.classify_all, self.recognise_all = engine.text_cls, engine.text_rec
        engine.text_det.infer = self.detect
        engine.text_cls, engine.text_rec = self.classify, self.recognise
        self._reading = threading.local()
        self._detector = threading.Lock()

    @property
    def max_lines(self) -> int | None:
        return getattr(self._reading, "max_lines", None)

    @property
    def stop(self) -> Callable[[], bool]:
        return getattr(self._reading, "stop", never)

    @contextmanager
    def reading(self, max_lines: int | None, stop: Callable[[], bool]) -> Iterator[None]:
        """The cap and `stop` of the reading the calling thread runs meanwhile."""
        self._reading.max_lines, self._reading.stop = max_lines, stop
        try:
            yield
        finally:
            del self._reading.max_lines, self._reading.stop

    def detect(self, batch: np.ndarray) -> list[np.ndarray]:
        """The detector's run, once the detector is free; ReadingStopped if `stop()` turns
        true meanwhile, whether waiting or running."""
        session = self.detection.session
        with terminated_once(self.stop) as options:
            while not self._detector.acquire(timeout=STOP_POLL_S):
                if options.terminate:
                    raise ReadingStopped
            try:
                return session.run(None, {session.get_inputs()[0].name: batch}, options)
            except Exception:
                if options.terminate:
                    raise ReadingStopped from None
                raise
            finally:
                self._detector.release()

    def chosen(self, crops: list[np.ndarray]) -> list[int]:
        """The crops to read, in the order PP-OCR batches them: the tallest `max_lines` (the
        most prominent text) when there are more."""
        order = range(len(crops))
        max_lines = self.max_lines
        if max_lines is not None and len(crops) > max_lines:
            tallest = np.argsort([-crop.shape[0] for crop in crops], kind="stable")
            order = sorted(int(i) for i in tallest[:max_lines])
        ratios = np.array([crops[i].shape[1] / float(crops[i].shape[0]) for i in order])
        return [order[int(i)] for i in np.argsort(ratios)]

    def slices(self, crops: list[np.ndarray]) -> Iterator[list[int]]:
        """The chosen crops in steps of whole batches (PP-OCR's, so a line reads the same as
        in one call) of at most PIXELS_PER_CALL of recogniser input, the first batch of a
        step whatever its size; none once `stop()` turns true."""
        chosen, stop = self.chosen(crops), self.stop
        step: list[int] = []
        pixels = 0
        for start in range(0, len(chosen), LINE_BATCH):
            batch = chosen[start : start + LINE_BATCH]
            widest = max(crops[i].shape[1] / crops[i].shape[0] for i in batch)
            cost = len(batch) * LINE_HEIGHT * max(MIN_LINE_WIDTH, math.ceil(LINE_HEIGHT * widest))
            if step and pixels + cost > PIXELS_PER_CALL:
                if stop():
                    return
                yield step
                step, pixels = [], 0
            step += batch
            pixels += cost
        if step and not stop():
            yield step

    def classify(self, crops: list[np.ndarray]) -> tuple[list[np.ndarray], list, float]:
        crops, results, elapsed = list(crops), [["0", 0.0]] * len(crops), 0.0
        for part in self.slices(crops):
            turned, found, seconds = self.classify_all([crops[i] for i in part])
            for i, crop, result in zip(part, turned, found, strict=True):
                crops[i], results[i] = crop, result
            elapsed += seconds
        return crops, results, elapsed

    def recognise(self, crops: list[np.ndarray], word_box: bool = False) -> tuple[list, float]:
        results: list = [("", 0.0)] * len(crops)
        elapsed = 0.0
        for part in self.slices(crops):
            found, seconds = self.recognise_all([crops[i] for i in part], word_box)
            for i, result in zip(part, found, strict=True):
                results[i] = result
            elapsed += seconds
        return results, elapsed


class OcrReader:
    """Reads every line of text in an image. Thread-safe: readings run at once, and wait for
    one another only for the detector, one run at a time (see `Stages`)."""

    def __init__(self, models: OcrModels = OcrModels(), *, threads: int | None = None) -> None:
        models.check()
        engine = _package().RapidOCR
        self.device = "cuda" if cuda_available() else "cpu"
        cuda = self.device == "cuda"
        options: dict[str, Any] = {
            "text_score": 0.0,
            "det_use_cuda": cuda,
            "cls_use_cuda": cuda,
            "rec_use_cuda": cuda,
            "intra_op_num_threads": threads or -1,
        }
        if models.det is not None:
            options["det_model_path"] = str(models.det)
        if models.rec is not None:
            options["rec_model_path"] = str(models.rec)
        self.engine = engine(**options)
        self.stages = Stages(self.engine)
        self.identity = reader_identity(models)

    def read(
        self,
        image: Image.Image,
        *,
        max_lines: int | None = None,
        stop: Callable[[], bool] = never,
    ) -> list[OcrLine]:
        """Lines in reading order (top to bottom, left to right), unfiltered: the tallest
        `max_lines` of them, and only those read before `stop()` turned true."""
        fitted, scale = fitted_for_the_detector(image)
        with self.stages.reading(max_lines, stop):
            try:
                found, _ = self.engine(fitted)
            except ReadingStopped:
                found = None
        width, height = image.size
        return [
            OcrLine(
                text=str(text).strip(),
                confidence=round(float(score), 4),
                box=tuple(
                    (round(min(x / scale, width)), round(min(y / scale, height))) for x, y in box
                ),
            )
            for box, text, score in found or ()
            if str(text).strip()
        ]


def model_files(models: OcrModels) -> dict[str, Path]:
    """The detection and recognition files in use: the given ones, else those the wheel's
    config.yaml names."""
    import yaml

    root = Path(_package().__file__).parent
    config = yaml.safe_load((root / "config.yaml").read_text())
    return {
        "det": Path(models.det or root / config["Det"]["model_path"]),
        "rec": Path(models.rec or root / config["Rec"]["model_path"]),
    }


def reader_identity(models: OcrModels) -> dict[str, str]:
    """What a cached line depends on: the package version and each model file's digest."""
    try:
        package = f"{PACKAGE} {version(PACKAGE)}"
    except PackageNotFoundError:
        package = PACKAGE
    files = model_files(models)
    return {
        "package": package,
        **{name: f"{path.name} {file_digest(path)['xxh3_128']}" for name, path in files.items()},
    }
