"""An instruction model as a judge: P("yes") that a source helps answer a question (source
selection), that an image shows what a claim citing it says, or that a cited text says it
(verification).

One judge serves all three, so the reading of P("yes") exists once: the reranker receives it
through retrieval's RelevanceJudge protocol (retrieval never imports generation), and the
attributor asks it about claims cited to images, which only a model that sees the pixels can
check, and about claims whose text verifier is unsure. The judge may be another model than the
generator (a small writer checked by a stronger VLM).

The attributor's questions for one claim are asked together (`answer_all`): concurrently, so
that an engine that batches (the transformers engine's batcher, vLLM, any server) reads them in
one batch, and within a deadline of their own, past which the unanswered ones are undecided.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass

from mmrag.generation.engines.base import Engine, Message
from mmrag.generation.errors import NoLogprobs
from mmrag.generation.prompts import entailment_messages, judge_messages, support_messages
from mmrag.generation.reading.text import read
from mmrag.generation.types import SourceLike
from mmrag.runtime.deadline import check

YES = frozenset({"yes"})
NO = frozenset({"no"})
UNDECIDED = 0.5  # neither answer among the top tokens, or a reply that is neither
# How long the questions about one claim may take together (`LMJudge.answer_all`), within the
# request's own deadline: a slow judge leaves the claim as the text verifier judged it.
JUDGE_TIMEOUT_S = 10.0
MAX_CONCURRENT = 16  # questions in flight at once: a batch's worth for a batching engine
POLL_S = 0.05  # how often a wait for answers asks `interrupt()`


@dataclass(frozen=True)
class Shows:
    """Does the image source show the claim (its caption as context)?"""

    question: str
    claim: str
    source: SourceLike


@dataclass(frozen=True)
class Entails:
    """Does the text (a cited source's title, snippet and any OCR text) say the claim?"""

    question: str
    claim: str
    evidence: str


Ask = Shows | Entails


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
        self,
        engine: Engine,
        *,
        images: Callable[[SourceLike], bytes | None] | None = None,
        timeout_s: float | None = JUDGE_TIMEOUT_S,
    ) -> None:
        """`timeout_s`: how long `answer_all` waits for its answers (None: as long as its
        caller's `interrupt` allows)."""
        self.engine = engine
        self.images = images if engine.info.accepts_images else None
        self.timeout_s = timeout_s
        self._plain_replies = False  # the engine gave no token probabilities once: read replies
        # Threads start as questions come. Past a deadline, a question not yet sent is never
        # sent; one already sent runs to its end in its thread (an engine call cannot be taken
        # back), unwaited, and its answer is dropped.
        self._asking = ThreadPoolExecutor(MAX_CONCURRENT, thread_name_prefix="judge")

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

    def entails(self, question: str, claim: str, evidence: str) -> float | None:
        """P(the text says what the claim says, as an answer to the question); None when the
        judge says neither yes nor no. The text is cut to a bounded length
        (`prompts.MAX_EVIDENCE_CHARS`)."""
        said = self.probability(entailment_messages(question, claim, evidence))
        return None if said == UNDECIDED else said

    def answer(self, ask: Ask) -> float | None:
        if isinstance(ask, Shows):
            return self.support(ask.question, ask.claim, ask.source)
        return self.entails(ask.question, ask.claim, ask.evidence)

    def answer_all(
        self, asks: Sequence[Ask], *, interrupt: Callable[[], str | None] | None = None
    ) -> list[float | None]:
        """Each question's P("yes"), asked concurrently, in order; None for one undecided,
        failed (an engine error), or not answered before `timeout_s` or before `interrupt()`
        gives a reason to stop (the request's deadline, a client gone). Never raises for a
        question: a judge that fails leaves the claim to the text verifier."""
        return within(
            [lambda ask=ask: self.answer(ask) for ask in asks],
            self._asking,
            timeout_s=self.timeout_s,
            interrupt=interrupt,
        )

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


def within(
    calls: Sequence[Callable[[], float | None]],
    threads: ThreadPoolExecutor,
    *,
    timeout_s: float | None,
    interrupt: Callable[[], str | None] | None = None,
) -> list[float | None]:
    """The calls' results, run on `threads` concurrently, each None where it failed or had
    not returned when `timeout_s` passed or `interrupt()` said stop; those not started by then
    never start."""
    futures: list[Future] = [threads.submit(call) for call in calls]
    until = None if timeout_s is None else time.monotonic() + timeout_s
    pending = set(futures)
    while pending:
        stop = interrupt is not None and interrupt() is not None
        left = None if until is None else until - time.monotonic()
        if stop or (left is not None and left <= 0):
            break
        wait_s = left  # None: until one returns
        if interrupt is not None:  # asked again every POLL_S
            wait_s = POLL_S if left is None else min(POLL_S, left)
        pending = wait(pending, timeout=wait_s, return_when=FIRST_COMPLETED).not_done
    for future in pending:
        future.cancel()
    return [_result(future) for future in futures]


def _result(future: Future) -> float | None:
    """A call's result; None if it has none. A judge is advisory: whatever failed in it (an
    engine error, a server's malformed reply) leaves the verdict to the text verifier rather
    than failing the answer."""
    if not future.done() or future.cancelled():
        return None
    try:
        return future.result()
    except Exception:
        return None
