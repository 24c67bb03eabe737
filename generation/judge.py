"""An instruction model as a relevance judge: P("yes") that a source helps answer a question.

The reranker (retrieval) receives this object through its RelevanceJudge protocol, so the
prompt lives here and retrieval never imports generation.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from mmrag.generation.engines.base import Engine
from mmrag.generation.prompts import judge_messages
from mmrag.generation.types import SourceLike

YES = frozenset({"yes"})
NO = frozenset({"no"})


def yes_probability(logprobs: dict[str, float]) -> float:
    """P(yes) / (P(yes) + P(no)) over the top tokens, counting "Yes", " yes", "YES" alike.

    Renormalising over the two answers removes the mass the model puts on other openings
    ("The", "Based"); with neither answer among the top tokens the judge knows nothing: 0.5.
    """
    yes = sum(math.exp(lp) for token, lp in logprobs.items() if token.strip().lower() in YES)
    no = sum(math.exp(lp) for token, lp in logprobs.items() if token.strip().lower() in NO)
    return yes / (yes + no) if yes + no > 0 else 0.5


class LMJudge:
    """`images(source)` supplies an image source's bytes for engines that take images; others
    judge the caption (plus any OCR text)."""

    def __init__(
        self, engine: Engine, *, images: Callable[[SourceLike], bytes | None] | None = None
    ) -> None:
        self.engine = engine
        self.images = images if engine.info.accepts_images else None

    def relevance(self, question: str, source: SourceLike, ocr_text: str | None = None) -> float:
        image = None
        if self.images is not None and source.modality == "image":
            image = self.images(source)
        if ocr_text is None:
            ocr_text = getattr(source, "ocr_text", None)
        messages = judge_messages(question, source, ocr_text=ocr_text, image=image)
        return yes_probability(self.engine.next_token_logprobs(messages, top_k=20))
