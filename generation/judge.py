"""An instruction model as a judge: P("yes") that a source helps answer a question (source
selection), or that an image shows what a claim citing it says (verification).

One judge serves both, so the reading of P("yes") exists once: the reranker receives it through
retrieval's RelevanceJudge protocol (retrieval never imports generation), and the attributor
asks it about claims cited to images, which only a model that sees the pixels can check. The
judge may be another model than the generator (a small writer checked by a stronger VLM).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from mmrag.generation.engines.base import Engine, Message
from mmrag.generation.errors import NoLogprobs
from mmrag.generation.prompts import judge_messages, support_messages
from mmrag.generation.reading.text import read
from mmrag.generation.types import SourceLike
from mmrag.runtime.deadline import check

YES = frozenset({"yes"})
NO = frozenset({"no"})
UNDECIDED = 0.5  # neither answer among the top tokens, or a reply that is neither


def yes_probability(logprobs: dict[str, float]) -> float:
    """P(yes) / (P(yes) + P(no)) over the top tokens, counting "Yes", " yes", "YES" alike.

    Renormalising over the two answers removes the mass the model puts on other openings
    ("The", "Based"); with neither answer among the top tokens the judge knows nothing: 0.5.
    """
    yes = sum(math.exp(lp) for token, lp in logprobs.items() if token.strip().lower() in YES)
    no = sum(math.exp(lp) for token, lp in logprobs.items() if token.strip().lower() in NO)
    return yes / (yes + no) if yes + no > 0 else UNDECIDED


def reply_probability(reply: str) -> float:
    """A plain reply read as a probability: "Yes." is 1, "no" is 0, anything else undecided."""
    words = [word.text.lower() for word in read(reply).words if word.text[0].isalnum()]
    word = words[0] if words else ""
    return 1.0 if word in YES else 0.0 if word in NO else UNDECIDED


class LMJudge:
    """`images(source)` supplies an image source's bytes for engines that take images; others
    judge the caption (plus any OCR text), and cannot check a claim against pixels."""

    def __init__(
        self, engine: Engine, *, images: Callable[[SourceLike], bytes | None] | None = None
    ) -> None:
        self.engine = engine
        self.images = images if engine.info.accepts_images else None
        self._plain_replies = False  # the engine gave no token probabilities once: read replies

    @property
    def sees_images(self) -> bool:
        return self.images is not None

    def _image(self, source: SourceLike) -> bytes | None:
        if self.images is None or source.modality != "image":
            return None
        return self.images(source)

    def relevance(self, question: str, source: SourceLike, ocr_text: str | None = None) -> float:
        if ocr_text is None:
            ocr_text = getattr(source, "ocr_text", None)
        messages = judge_messages(question, source, ocr_text=ocr_text, image=self._image(source))
        return self.probability(messages)

    def support(self, question: str, claim: str, source: SourceLike) -> float | None:
        """P(the image source shows the claim, its caption as context); None when the judge
        cannot see it (an engine without images, a source whose bytes are missing) or says
        neither yes nor no."""
        image = self._image(source)
        if not image:
            return None
        seen = self.probability(support_messages(question, claim, source, image=image))
        return None if seen == UNDECIDED else seen

    def probability(self, messages: list[Message]) -> float:
        """P("yes") from the next token's probabilities; from a short reply where the engine
        gives none (an OpenAI-compatible server without `logprobs`), asked that way from then
        on rather than failing twice per question. Each call is a step the request's deadline
        is checked before (`runtime.deadline`)."""
        check()
        if not self._plain_replies:
            try:
                return yes_probability(self.engine.next_token_logprobs(messages, top_k=20))
            except NoLogprobs:
                self._plain_replies = True
        return reply_probability(self.engine.chat(messages, max_tokens=3, temperature=0.0))
