"""Grounding: one box, in the image's pixels, around the thing that answers a question.

Two strategies behind one interface, `Grounder.locate(image, question)`:

- `TwoStepGrounder`, the shape of the Toloka VQA paper's strongest zero-shot baseline (OFA
  names the answer, SAM segments it: IoU 44.851): the generator names the object that answers,
  then an open-vocabulary detector (`generation.detector`) boxes it. A generator that sees
  images names it from the picture; a text-only one from the question (and answer), which for
  Toloka's "What do we drive for personal use?" is usually enough.
- `VLMGrounder`: a grounding VLM writes the box itself, as Qwen2.5-VL does
  (`[{"bbox_2d": [x1, y1, x2, y2], "label": "car"}]`); the reply is parsed and clipped.

What cannot give a box (an image that will not decode, a reply without a parseable box, a box
wholly outside the image) gives a `Grounding` whose `region` is None and whose `error` says why,
so a benchmark run counts it and a service answers without it: grounding never raises for bad
pixels or bad replies. `CitationGrounder` adds the box to each cited image source of an answer.
"""

from __future__ import annotations

import io
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, Protocol

from mmrag.generation.engines.base import Engine
from mmrag.generation.errors import GenerationError
from mmrag.generation.prompts import box_messages, name_object_messages
from mmrag.generation.rationale import short_answer
from mmrag.generation.types import Answer, Region, SourceLike

if TYPE_CHECKING:
    from PIL import Image

    from mmrag.generation.detector import OpenVocabularyDetector

GrounderName = Literal["detector", "vlm"]

# Qwen2.5-VL's processor resizes each image to multiples of 28 pixels (14-pixel patches merged
# 2x2) between these pixel counts, and its boxes are in that resized image's pixels.
QWEN_FACTOR = 28
QWEN_MIN_PIXELS = 56 * 56
QWEN_MAX_PIXELS = 16384 * 28 * 28
MAX_QUERY_WORDS = 8
NAME_TOKENS = 24  # room for a small model's "The object ... is a car"

_NUMBER = r"-?\d+(?:\.\d+)?"
_BOX = re.compile(
    rf"[\"']?(?:bbox_2d|bbox|box)[\"']?\s*[:=]\s*[\[(]\s*((?:{_NUMBER}\s*,\s*){{3}}{_NUMBER})\s*[\])]",
    re.IGNORECASE,
)
_COPULA = re.compile(r"\b(?:is|are)\s+(?:an?|the)\b\s*", re.IGNORECASE)
_LABEL = re.compile(r"[\"']label[\"']\s*:\s*[\"']([^\"'\n]{1,80})[\"']", re.IGNORECASE)


@dataclass(frozen=True)
class Grounding:
    region: Region | None  # None: no box, and `error` says why
    query: str  # what was looked for: the object named (two-step), or the question (VLM)
    error: str | None = None
    timings: dict[str, float] = field(default_factory=dict)


class Grounder(Protocol):
    strategy: GrounderName

    def locate(self, image: bytes, question: str, *, answer: str | None = None) -> Grounding:
        """One box for `question` in the image (JPEG/PNG bytes), or the reason there is none.

        `answer`, when given, is what was said about the image (a cited answer): the box is
        then of the thing it is about. Callers bound the pixel count before calling (the
        service and the eval runs decode with `indexes.images.decode_image` first).
        """
        ...


def clip_region(
    coordinates: Sequence[float], width: int, height: int, *, score: float | None, label: str
) -> Region | None:
    """(x1, y1, x2, y2) in any corner order, clipped to the image; None when nothing is left
    (a box wholly outside the image, or of zero width or height) or a coordinate is not finite."""
    x1, y1, x2, y2 = (float(value) for value in coordinates)
    if not all(math.isfinite(value) for value in (x1, y1, x2, y2)):
        return None
    left, right = (min(max(x, 0.0), width) for x in sorted((x1, x2)))
    top, bottom = (min(max(y, 0.0), height) for y in sorted((y1, y2)))
    if right <= left or bottom <= top:
        return None
    return Region(left, top, right, bottom, score=score, label=label)


def parse_box_reply(reply: str) -> tuple[list[float], str] | None:
    """The first box of a grounding VLM's reply and its label ("" without one), or None.

    Qwen2.5-VL writes a JSON list of `{"bbox_2d": [x1, y1, x2, y2], "label": ...}`, usually in
    a ```json fence and sometimes cut short by the token limit after its first box; reading the
    first `bbox_2d` (or `bbox`) with a pattern copes with all of these, and with single quotes.
    """
    found = _BOX.search(reply)
    if found is None:
        return None
    coordinates = [float(number) for number in re.findall(_NUMBER, found.group(1))]
    label = _LABEL.search(reply)
    return coordinates, label.group(1).strip() if label else ""


def qwen_grid(width: int, height: int) -> tuple[int, int]:
    """The (width, height) Qwen2.5-VL's processor resizes an image to (its `smart_resize`)."""

    def rounded(value: float) -> int:
        return max(QWEN_FACTOR, round(value / QWEN_FACTOR) * QWEN_FACTOR)

    grid_w, grid_h = rounded(width), rounded(height)
    if grid_w * grid_h > QWEN_MAX_PIXELS:
        beta = math.sqrt(width * height / QWEN_MAX_PIXELS)
        grid_w = max(QWEN_FACTOR, math.floor(width / beta / QWEN_FACTOR) * QWEN_FACTOR)
        grid_h = max(QWEN_FACTOR, math.floor(height / beta / QWEN_FACTOR) * QWEN_FACTOR)
    elif grid_w * grid_h < QWEN_MIN_PIXELS:
        beta = math.sqrt(QWEN_MIN_PIXELS / (width * height))
        grid_w = math.ceil(width * beta / QWEN_FACTOR) * QWEN_FACTOR
        grid_h = math.ceil(height * beta / QWEN_FACTOR) * QWEN_FACTOR
    return grid_w, grid_h


def open_image(data: bytes) -> Image.Image:
    """RGB pixels, upright as their EXIF orientation says (the frame the service decodes and
    reports the image's size in, so boxes land on it); bytes that are not an image are a
    GenerationError, caught by `locate`."""
    from PIL import Image, ImageOps

    try:
        with Image.open(io.BytesIO(data)) as image:
            return ImageOps.exif_transpose(image).convert("RGB")
    except (OSError, Image.DecompressionBombError):
        raise GenerationError("the image does not decode (not an image file, or broken)") from None


def named_object(reply: str) -> str:
    """A short noun phrase from the generator's reply: detectors take a few words. Small models
    answer in a sentence ("The object in the image that answers the question is a car"), so
    what follows its last "is a"/"are the" is the name; a sentence cut off right after one
    names nothing ("")."""
    said = _COPULA.split(short_answer(reply))[-1]
    return " ".join(said.split()[:MAX_QUERY_WORDS])


class TwoStepGrounder:
    """The generator names what answers, the detector boxes it. When the generator says
    nothing usable, the question itself is the detector's query (OWL's text tower reads its
    first 16 tokens), so a box comes back whenever the detector finds one."""

    strategy: GrounderName = "detector"

    def __init__(self, engine: Engine, detector: OpenVocabularyDetector) -> None:
        self.engine = engine
        self.detector = detector

    def locate(self, image: bytes, question: str, *, answer: str | None = None) -> Grounding:
        started = time.perf_counter()
        try:
            pixels = open_image(image)
        except GenerationError as exc:
            return Grounding(None, "", str(exc))
        seen = image if self.engine.info.accepts_images else None
        messages = name_object_messages(question, image=seen, answer=answer)
        query = named_object(self.engine.chat(messages, max_tokens=NAME_TOKENS)) or question
        named = time.perf_counter()
        region = self.detector.detect(pixels, query)
        timings = {"name_s": named - started, "detect_s": time.perf_counter() - named}
        error = None if region is not None else f"the detector found no {query!r} in the image"
        return Grounding(region, query, error, timings)


class VLMGrounder:
    """A VLM that writes boxes (Qwen2.5-VL's `bbox_2d` JSON, in the pixels of the image its
    processor resized to `qwen_grid`; mapped back to the image's own pixels here)."""

    strategy: GrounderName = "vlm"

    def __init__(self, engine: Engine, *, max_tokens: int = 128) -> None:
        if not engine.info.accepts_images:
            raise GenerationError(
                f"--grounder vlm needs an engine that sees images, and {engine.info.name} model "
                f"{engine.info.model} does not: serve a grounding VLM (e.g. Qwen2.5-VL) and pass "
                "--engine openai --vision, or use --grounder detector with --detector"
            )
        self.engine = engine
        self.max_tokens = max_tokens

    def locate(self, image: bytes, question: str, *, answer: str | None = None) -> Grounding:
        started = time.perf_counter()
        try:
            width, height = open_image(image).size
        except GenerationError as exc:
            return Grounding(None, question, str(exc))
        reply = self.engine.chat(
            box_messages(question, image=image, answer=answer), max_tokens=self.max_tokens
        )
        timings = {"box_s": time.perf_counter() - started}
        parsed = parse_box_reply(reply)
        if parsed is None:
            shown = " ".join(reply.split())[:80]
            error = f"no bbox_2d box in the model's reply {shown!r}"
            return Grounding(None, question, error, timings)
        (x1, y1, x2, y2), label = parsed
        grid_w, grid_h = qwen_grid(width, height)
        sx, sy = width / grid_w, height / grid_h
        region = clip_region(
            (x1 * sx, y1 * sy, x2 * sx, y2 * sy), width, height, score=None, label=label
        )
        if region is None:
            error = f"the model's box {[x1, y1, x2, y2]} lies outside the {width}x{height} image"
            return Grounding(None, question, error, timings)
        return Grounding(region, question, None, timings)


class CitationGrounder:
    """Boxes the region of each cited image that supports an answer (`Citation.box`).

    `images(source)` gives an image source's bytes, or None where there are none (its citation
    then has no box). Each cited image is grounded once, with the answer's sentence, so the box
    is of what the answer says rather than of the question's subject alone.
    """

    def __init__(self, grounder: Grounder, images: Callable[[SourceLike], bytes | None]) -> None:
        self.grounder = grounder
        self.images = images

    def _box(self, question: str, answer: Answer, source: SourceLike) -> Region | None:
        data = self.images(source)
        if not data:
            return None
        try:
            found = self.grounder.locate(data, question, answer=answer.text_without_markers)
        except GenerationError:  # the generator failed while naming: the answer stands unboxed
            return None
        return found.region

    def ground(self, question: str, answer: Answer) -> Answer:
        started = time.perf_counter()
        by_id = {source.id: source for source in answer.sources}
        boxes: dict[str, Region | None] = {}
        citations = []
        for citation in answer.citations:
            source = by_id.get(citation.source_id)
            if citation.modality != "image" or source is None:
                citations.append(citation)
                continue
            if citation.source_id not in boxes:
                boxes[citation.source_id] = self._box(question, answer, source)
            citations.append(replace(citation, box=boxes[citation.source_id]))
        timings = {**answer.timings, "ground_s": time.perf_counter() - started}
        return replace(answer, citations=citations, timings=timings)
