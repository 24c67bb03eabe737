"""The corpus model: every retrievable item, image or text, is one `Source`.

A source's `text` is what language-side retrievers see: the caption of an image or the body of a
snippet. `image_ref` locates image bytes for the image store (a WebQA image id, or a file path for
users' corpora); it is internal and never sent to clients.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Modality = Literal["image", "text"]
MODALITIES: tuple[Modality, ...] = ("image", "text")


@dataclass(frozen=True, slots=True)
class Source:
    id: str
    modality: Modality
    title: str
    text: str
    url: str = ""
    image_ref: str | None = None

    @property
    def search_text(self) -> str:
        """Title and body together: WebQA titles often carry the entity the question names."""
        return f"{self.title}. {self.text}" if self.title else self.text

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> Source:
        return cls(
            id=str(record["id"]),
            modality=record["modality"],
            title=record.get("title") or "",
            text=record.get("text") or "",
            url=record.get("url") or "",
            image_ref=record.get("image_ref"),
        )
