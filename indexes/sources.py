"""The corpus model: every retrievable item, image or text, is one `Source`.

A source's `text` is what language-side retrievers see: the caption of an image or the body of a
snippet. `image_ref` locates image bytes for the image store (a WebQA image id, or a file path for
users' corpora); it is internal and never sent to clients. `ocr` holds the scene text an index
built with `--ocr` read in an image: captions rarely spell the words on a sign, so that text is
evidence of its own, searched in its own lists ("bm25/ocr", "text/ocr") and shown to the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Modality = Literal["image", "text"]
MODALITIES: tuple[Modality, ...] = ("image", "text")
# The lists over text read in images: their rows are image sources, searched by their OCR text.
OCR = "ocr"


@dataclass(frozen=True, slots=True)
class OcrLine:
    """One line of scene text: what it says, how sure the reader was, and where it is (four
    corner points, clockwise from the top left, in pixels of the original image)."""

    text: str
    confidence: float
    box: tuple[tuple[int, int], ...]

    def to_dict(self) -> dict[str, Any]:
        box = [list(point) for point in self.box]
        return {"text": self.text, "confidence": self.confidence, "box": box}

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> OcrLine:
        return cls(
            text=str(record["text"]),
            confidence=float(record["confidence"]),
            box=tuple((int(x), int(y)) for x, y in record["box"]),
        )


@dataclass(frozen=True, slots=True)
class Source:
    id: str
    modality: Modality
    title: str
    text: str
    url: str = ""
    image_ref: str | None = None
    ocr: tuple[OcrLine, ...] = ()

    @property
    def search_text(self) -> str:
        """Title and body together: WebQA titles often carry the entity the question names."""
        return f"{self.title}. {self.text}" if self.title else self.text

    @property
    def ocr_text(self) -> str:
        """The lines read in the image, in reading order (top to bottom, left to right)."""
        return " ".join(line.text for line in self.ocr)

    @property
    def evidence_text(self) -> str:
        """What a reranker reads: the search text and, for images, the text read in them."""
        if not self.ocr:
            return self.search_text
        return f"{self.search_text} Text in the image: {self.ocr_text}"

    def to_dict(self) -> dict[str, Any]:
        """The corpus fields; OCR lines are read later in a build and stored apart. (Written
        out: `dataclasses.asdict` deep-copies every field, a third of a 930K build's store.)"""
        return {
            "id": self.id,
            "modality": self.modality,
            "title": self.title,
            "text": self.text,
            "url": self.url,
            "image_ref": self.image_ref,
        }

    @classmethod
    def from_dict(cls, record: dict[str, Any], ocr: tuple[OcrLine, ...] = ()) -> Source:
        return cls(
            id=str(record["id"]),
            modality=record["modality"],
            title=record.get("title") or "",
            text=record.get("text") or "",
            url=record.get("url") or "",
            image_ref=record.get("image_ref"),
            ocr=ocr,
        )
