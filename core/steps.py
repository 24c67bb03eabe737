"""The steps after generation: an ordered list, each with one interface.

An answer leaves the writer as the model wrote it. Each step then takes the answer and returns
it, checked or completed: its citations verified against their sources (the pixels of cited
images too, where a judge sees them), an answer about the attached photo held to that photo,
a question the sources leave open read off the photo's text, and cited images boxed. The run
(`QARun`) only calls them in order and adds each one's seconds to its field of `Timings`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from mmrag.core.attachments import AttachedImage
from mmrag.generation.reading.question import Question
from mmrag.generation.scene_text import (
    SceneTextAnswerer,
    cites_what_is_pointed_at,
    read_off_the_image,
)
from mmrag.generation.types import Answer, SourceLike
from mmrag.generation.verification.attribution import UNANSWERED, Attributor
from mmrag.runtime.deadline import current

if TYPE_CHECKING:
    from mmrag.generation.grounding import CitationGrounder


@dataclass(frozen=True)
class StepContext:
    """What every step may need besides the answer."""

    question: Question  # read once, as resolved from the conversation
    image: AttachedImage | None  # the user's photo, source [1], if one came with the question
    abstain: bool  # decline what no source supports (else keep it, uncited)
    # Retrieved sources not selected, best first: where a source's own sentence may still
    # answer what the selected ones do not (a bridge's river, one snippet down).
    runners_up: tuple[SourceLike, ...] = ()


class Step(Protocol):
    timing: str  # the field of `Timings` its seconds are added to
    stage: str  # its name where the deadline stops it (`runtime.deadline.stage`)
    # Whether an answer stopped in it is no answer; else it is the answer as the step got it.
    needed: bool

    def __call__(self, answer: Answer, context: StepContext) -> Answer: ...


class Verify:
    """Every citation checked against its source; what none supports is declined or replaced."""

    timing, stage, needed = "verify_s", "verify", True

    def __init__(self, attributor: Attributor) -> None:
        self.attributor = attributor

    def __call__(self, answer: Answer, context: StepContext) -> Answer:
        deadline = current()  # the request's: a judge's wait for its answers stops with it
        return self.attributor.attribute(
            context.question,
            answer,
            abstain=context.abstain,
            runners_up=context.runners_up,
            interrupt=None if deadline is None else deadline.why_stop,
        )


class HoldToThePhoto:
    """A question that points at the attached photo ("What does this bus say?") is answered
    from the photo or from a source about what it points at, or not at all; an answer the
    photo supports cites the photo."""

    timing, stage, needed = "verify_s", "verify", True

    def __init__(self, attributor: Attributor) -> None:
        self.attributor = attributor

    def __call__(self, answer: Answer, context: StepContext) -> Answer:
        image = context.image
        if image is None:
            return answer
        if not cites_what_is_pointed_at(context.question, answer, image.id):
            return self.attributor.unanswered(answer, abstain=context.abstain)
        if answer.sources and answer.sources[0].id == image.id:  # the photo is source [1]
            return self.attributor.cite_instead(context.question, answer, 1)
        return answer


class ReadOffThePhoto:
    """What no source supports, answered from the attached photo's own text, cited to it."""

    timing, stage, needed = "generate_s", "generate", False  # stopped: the checked decline

    def __init__(self, answerer: SceneTextAnswerer) -> None:
        self.answerer = answerer

    def __call__(self, answer: Answer, context: StepContext) -> Answer:
        image = context.image
        if image is None or answer.attribution not in UNANSWERED:
            return answer
        lines = [line.text for line in image.ocr]
        return read_off_the_image(
            self.answerer, context.question, answer, image, lines, data=image.data
        )


class Ground:
    """Each cited image boxed where it supports the answer, while the deadline allows (the run
    checks it before every step)."""

    timing, stage, needed = "ground_s", "ground", False  # stopped: the answer without boxes

    def __init__(self, grounder: CitationGrounder) -> None:
        self.grounder = grounder

    def __call__(self, answer: Answer, context: StepContext) -> Answer:
        return self.grounder.ground(context.question.text, answer)


def after_generation(
    attributor: Attributor,
    *,
    scene_text: SceneTextAnswerer | None = None,
    grounder: CitationGrounder | None = None,
) -> list[Step]:
    """The steps in their order: verification first, since later steps build on what it
    kept; boxes last, on the citations that remain."""
    steps: list[Step] = [Verify(attributor), HoldToThePhoto(attributor)]
    if scene_text is not None:
        steps.append(ReadOffThePhoto(scene_text))
    if grounder is not None:
        steps.append(Ground(grounder))
    return steps
