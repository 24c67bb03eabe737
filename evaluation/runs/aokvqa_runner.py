"""What answers one A-OKVQA question: a rationale, then the direct answer, then the choice,
by the rationale writer (`generation.rationale`), with the COCO image for engines that see
images, its caption for those that do not, and knowledge retrieved from an index when one is
given. This process, or each Ray worker, builds one with `build_runner`.

The multiple-choice answer is always one of the item's choices, since the official metric
scores anything else 0 and a blank would hide how often the chooser had no preference: the
first choice stands in, and the record says so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mmrag.evaluation.errors import EvaluationError
from mmrag.evaluation.io import as_id
from mmrag.evaluation.loaders.aokvqa import AOKVQAItem
from mmrag.indexes.errors import InputError
from mmrag.indexes.images import decode_image

if TYPE_CHECKING:  # models load only when a run starts; `mmrag --help` stays instant
    from mmrag.core.settings import Settings
    from mmrag.generation.rationale import RationaleWriter
    from mmrag.retrieval.hybrid import HybridRetriever


@dataclass
class AOKVQARunner:
    """Rationale, direct answer and multiple choice for one item; what the checkpoint stores."""

    writer: RationaleWriter
    coco_dir: Path
    split: str
    captions: dict[str, str]
    retriever: HybridRetriever | None = None
    knowledge: int = 2

    def _image(self, item: AOKVQAItem) -> bytes:
        path = item.image_path(self.coco_dir, self.split)
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


def build_runner(
    settings: Settings,
    *,
    choose: str,
    coco_dir: Path,
    split: str,
    captions: dict[str, str],
    knowledge: int,
    retrieve: bool,
) -> AOKVQARunner:
    """A runner with its own writer (and retriever, with `--index`): what this process, or
    each Ray worker, builds."""
    from mmrag.core.components import build_engine, build_retriever
    from mmrag.generation.rationale import RationaleWriter

    embed = None
    if choose == "similarity":
        from mmrag.indexes.encoders.loading import text_encoder
        from mmrag.indexes.encoders.text import DEFAULT_TEXT_EMBEDDER

        embed = text_encoder(DEFAULT_TEXT_EMBEDDER, device=settings.device).encode_texts
    return AOKVQARunner(
        RationaleWriter(build_engine(settings), choose=choose, embed=embed),
        coco_dir=coco_dir,
        split=split,
        captions=captions,
        retriever=build_retriever(settings) if retrieve else None,
        knowledge=knowledge,
    )
