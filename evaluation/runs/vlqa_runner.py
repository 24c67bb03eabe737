"""What answers one VLQA item: the rationale writer (`generation.rationale`) with the item's
passage as the one knowledge source, and its image for engines that see images, or, for
text-only engines, what `--captions` says of it and, with `--ocr`, the text PP-OCR reads in it
(VLQA's images are often charts and diagrams whose words carry the answer). An item whose
image lists several sub-images is shown them side by side, as the release's composite images
are; one whose image is missing or does not decode is answered from its text, and the record
says why. This process, or each Ray worker, builds one with `build_runner`.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from mmrag.evaluation.loaders.vlqa import VLQAItem
from mmrag.indexes.errors import InputError
from mmrag.indexes.images import decode_image

if TYPE_CHECKING:  # models load only when a run starts; `mmrag --help` stays instant
    from mmrag.core.attachments import ImageAttacher
    from mmrag.core.settings import Settings
    from mmrag.generation.rationale import RationaleWriter


@dataclass(frozen=True)
class Passage:
    """An item's passage as the one knowledge source the rationale prompt shows."""

    text: str
    id: str = "passage"
    modality: str = "text"
    title: str = "Passage"


def image_names(item: VLQAItem) -> list[str]:
    return [item.image] if isinstance(item.image, str) else [str(name) for name in item.image]


def image_path(name: str, images: Path) -> Path:
    """The image under `--images` by its relative path, else by its file name."""
    relative = images / name
    return relative if relative.is_file() else images / PurePosixPath(name).name


def side_by_side(images: Sequence[bytes]) -> bytes:
    """One PNG of several images in a row, tops aligned: how the release composes sub-images."""
    from PIL import Image

    pictures = [decode_image(data) for data in images]
    canvas = Image.new(
        "RGB", (sum(p.width for p in pictures), max(p.height for p in pictures)), "white"
    )
    left = 0
    for picture in pictures:
        canvas.paste(picture, (left, 0))
        left += picture.width
    buffer = io.BytesIO()
    canvas.save(buffer, format="PNG")
    return buffer.getvalue()


def scene_text_reader(attacher: ImageAttacher) -> Callable[[bytes], str]:
    """PP-OCR's lines of an image, joined in reading order (see `core.attachments`)."""
    return lambda data: attacher.attach(data).ocr_text


@dataclass
class VLQARunner:
    """One item's choice index; what the checkpoint stores. `read_text(image)` is the scene
    text of an image (OCR), for text-only engines."""

    writer: RationaleWriter
    images: Path
    texts: dict[str, str]
    read_text: Callable[[bytes], str] | None = None

    def _image(self, item: VLQAItem) -> tuple[bytes | None, str | None]:
        """The image bytes (None without), and why there are none."""
        paths = [image_path(name, self.images) for name in image_names(item) if name]
        if not paths:
            return None, "the item names no image"
        try:
            data = [path.read_bytes() for path in paths]
            if len(data) > 1:
                return side_by_side(data), None
            decode_image(data[0])  # an image the engine could not decode is no image
            return data[0], None
        except FileNotFoundError as exc:
            return None, f"{exc.filename}: no such image"
        except InputError as exc:
            return None, str(exc)

    def __call__(self, item: VLQAItem) -> dict[str, Any]:
        started = time.perf_counter()
        image, image_error = self._image(item)
        texts = [self.texts.get(PurePosixPath(name).name) for name in image_names(item)]
        scene_text = self.read_text(image) if self.read_text and image is not None else ""
        if scene_text:
            texts.append(f"Text in the image: {scene_text}")
        result = self.writer.answer(
            item.question,
            image=image,
            caption=" ".join(text for text in texts if text) or None,
            choices=list(item.choices),
            knowledge=[Passage(item.passage)] if item.passage else [],
        )
        chosen = result.multiple_choice
        return {
            "answer": item.choices.index(chosen) if chosen is not None else 0,
            "choice_fallback": chosen is None,
            "direct_answer": result.direct_answer,
            "rationale": result.rationale,
            "image_error": image_error,
            "engine_sees_images": self.writer.engine.info.accepts_images,
            "scene_text": scene_text,
            "timings": {**result.timings, "total_s": time.perf_counter() - started},
        }


def build_runner(
    settings: Settings, *, images: Path, texts: dict[str, str], choose: str, ocr: bool
) -> VLQARunner:
    """A runner with its own writer (and OCR reader, for text-only engines with `--ocr`): what
    this process, or each Ray worker, builds."""
    from mmrag.core.components import build_attacher, build_engine, build_rationale_writer

    writer = build_rationale_writer(build_engine(settings), choose)
    read_text = None
    if ocr and not writer.engine.info.accepts_images:
        read_text = scene_text_reader(build_attacher(settings))
    return VLQARunner(writer, images=images, texts=texts, read_text=read_text)
