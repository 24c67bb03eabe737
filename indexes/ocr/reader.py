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


# PP-OCR scales an image's long side to at most this many pixels, then rounds each side to a
# multiple of this: a side that rounds to 0 raises (a 2001 x 1 PNG, a 4000 x 33 banner).
DETECTOR_MAX_SIDE, DETECTOR_STRIDE = 2000, 32


def padded_for_the_detector(image: Image.Image) -> Image.Image:
    """A strip too thin for the detector's grid, padded with white below or to the right (its
    pixels, and so the boxes of its lines, stay where they were): a banner is still read, and a
    1-pixel strip reads as nothing rather than failing."""
    width, height = image.size
    scale = max(1.0, max(width, height) / DETECTOR_MAX_SIDE)
    least = math.ceil(DETECTOR_STRIDE * scale)
    if min(width, height) >= least:
        return image
    canvas = Image.new("RGB", (max(width, least), max(height, least)), "white")
    canvas.paste(image.convert("RGB"), (0, 0))
    return canvas


# Crops per call of a line stage between two `stop()` checks: four of PP-OCR's batches of 6,
# about a second of recognition on 2 cores.
LINES_PER_CALL = 24


def never() -> bool:
    return False


class LineStages:
    """PP-OCR's per-line stages (direction classifier, recogniser) run in slices of crops, so
    that a caller can stop a reading between slices and cap how many lines it reads.

    After detection, the time a reading takes grows with its lines: a 2000 x 2000 upload dense
    with words had 664, 5 s to detect and 25 s more to recognise. The slices keep PP-OCR's own
    batches (crops sorted by aspect ratio, then taken six at a time), so a line reads the same
    as in one call. Lines not read are left empty, which `OcrReader.read` drops.
    """

    def __init__(self, engine: Any) -> None:
        self.classify_all, self.recognise_all = engine.text_cls, engine.text_rec
        engine.text_cls, engine.text_rec = self.classify, self.recognise
        self.max_lines: int | None = None
        self.stop: Callable[[], bool] = never

    def chosen(self, crops: list[np.ndarray]) -> list[int]:
        """The crops to read, in the order PP-OCR batches them: the tallest `max_lines` (the
        most prominent text) when there are more."""
        order = range(len(crops))
        if self.max_lines is not None and len(crops) > self.max_lines:
            tallest = np.argsort([-crop.shape[0] for crop in crops], kind="stable")
            order = sorted(int(i) for i in tallest[: self.max_lines])
        ratios = np.array([crops[i].shape[1] / float(crops[i].shape[0]) for i in order])
        return [order[int(i)] for i in np.argsort(ratios)]

    def slices(self, crops: list[np.ndarray]) -> Iterator[list[int]]:
        chosen = self.chosen(crops)
        for start in range(0, len(chosen), LINES_PER_CALL):
            if self.stop():
                return
            yield chosen[start : start + LINES_PER_CALL]

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
    """Reads every line of text in an image. Thread-safe: calls are serialised."""

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
        self.stages = LineStages(self.engine)
        self.identity = reader_identity(models)
        self._lock = threading.Lock()

    def read(
        self,
        image: Image.Image,
        *,
        max_lines: int | None = None,
        stop: Callable[[], bool] = never,
    ) -> list[OcrLine]:
        """Lines in reading order (top to bottom, left to right), unfiltered: the tallest
        `max_lines` of them, and only those read before `stop()` turned true."""
        image = padded_for_the_detector(image)
        with self._lock:
            self.stages.max_lines, self.stages.stop = max_lines, stop
            try:
                found, _ = self.engine(image)
            finally:
                self.stages.max_lines, self.stages.stop = None, never
        return [
            OcrLine(
                text=str(text).strip(),
                confidence=round(float(score), 4),
                box=tuple((round(float(x)), round(float(y))) for x, y in box),
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
