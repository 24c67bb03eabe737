"""A-OKVQA through the rationale writer: one item in, one prediction (plus its timings) out.

Each item's COCO image goes to engines that see images; text-only engines get the caption from
`--captions` instead. Knowledge retrieved from an index is optional context, as in `mmrag
rationale`. The multiple-choice answer is always one of the item's choices, since the official
metric scores anything else 0 and a blank would hide how often the chooser had no preference.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mmrag.evaluation.errors import DatasetError, EvaluationError
from mmrag.evaluation.io import as_id, read_json
from mmrag.evaluation.loaders.aokvqa import AOKVQAItem
from mmrag.generation.rationale import RationaleWriter
from mmrag.indexes.errors import InputError
from mmrag.indexes.images import decode_image
from mmrag.retrieval.hybrid import HybridRetriever


def load_captions(path: Path | None) -> dict[str, str]:
    """`{image_id: caption}`; ids as strings so "397133", 397133 and "000000397133" agree."""
    if path is None:
        return {}
    data = read_json(path)
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: expected a JSON object {{image_id: caption}}")
    captions: dict[str, str] = {}
    for key, caption in data.items():
        if not isinstance(caption, str):
            raise DatasetError(f"{path}: caption of image {key} is not a string")
        try:
            captions[str(int(key))] = caption
        except ValueError:
            raise DatasetError(f"{path}: {key!r} is not a COCO image id") from None
    return captions


def image_path(item: AOKVQAItem, coco_dir: Path, split: str) -> Path:
    return item.image_path(coco_dir, split)


def missing_images(items: Sequence[AOKVQAItem], coco_dir: Path, split: str) -> list[Path]:
    return [path for item in items if not (path := image_path(item, coco_dir, split)).is_file()]


class AOKVQARunner:
    """Rationale, direct answer and multiple choice for one item; what the checkpoint stores."""

    def __init__(
        self,
        writer: RationaleWriter,
        *,
        coco_dir: Path,
        split: str,
        captions: dict[str, str],
        retriever: HybridRetriever | None = None,
        knowledge: int = 2,
    ) -> None:
        self.writer = writer
        self.coco_dir = coco_dir
        self.split = split
        self.captions = captions
        self.retriever = retriever
        self.knowledge = knowledge

    def _image(self, item: AOKVQAItem) -> bytes:
        path = image_path(item, self.coco_dir, self.split)
        try:
            data = path.read_bytes()
            decode_image(data)
        except FileNotFoundError:
            raise EvaluationError(f"{path}: no such image (question {item.question_id})") from None
        except InputError as exc:
            raise EvaluationError(f"{path}: {exc} (question {item.question_id})") from None
        return data

    def __call__(self, item: AOKVQAItem) -> dict[str, Any]:
        started = time.perf_counter()
        image = self._image(item)
        knowledge = []
        if self.retriever is not None:
            candidates = self.retriever.search(item.question, self.knowledge)
            knowledge = [candidate.source for candidate in candidates]
        retrieved = time.perf_counter() - started
        result = self.writer.answer(
            item.question,
            image=image,
            caption=self.captions.get(as_id(item.image_id)),
            choices=list(item.choices) or None,
            knowledge=knowledge,
        )
        choice = result.multiple_choice
        fallback = bool(item.choices) and choice is None
        if fallback:
            choice = item.choices[0]
        return {
            "prediction": {
                "multiple_choice": choice,
                "direct_answer": result.direct_answer,
                "rationale": result.rationale,
            },
            "timings": {
                "image_and_knowledge_s": retrieved,
                **result.timings,
                "total_s": time.perf_counter() - started,
            },
            "choice_fallback": fallback,
        }


def predictions(
    items: Sequence[AOKVQAItem], records: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """`{question_id: {"multiple_choice", "direct_answer", "rationale"}}` in file order."""
    return {item.question_id: records[item.question_id]["prediction"] for item in items}
