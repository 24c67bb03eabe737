"""What generation takes in and hands back: plain dataclasses, no model code.

`SourceLike` is structural so `indexes.sources.Source` (and any object with the same fields)
can be passed without generation importing `indexes`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol


class SourceLike(Protocol):
    """A retrieved image or text source; `text` is the caption of an image or a snippet body.

    Declared as read-only properties so frozen dataclasses satisfy it. An optional `ocr_text`
    attribute (scene text read from an image) is used when present.
    """

    @property
    def id(self) -> str: ...

    @property
    def modality(self) -> str: ...  # "image" or "text"

    @property
    def title(self) -> str: ...

    @property
    def text(self) -> str: ...


@dataclass(frozen=True)
class Region:
    """A box in an image's pixels (left < right, top < bottom, inside the image)."""

    left: float
    top: float
    right: float
    bottom: float
    score: float | None  # the detector's confidence; None for a VLM's box, which has none
    label: str  # what was looked for, or the VLM's name for what it boxed


# What decided that a source supports a claim: its text (the verifier), a judge that looked at
# its image, or a judge model that read its text where the verifier was unsure.
JudgedBy = Literal["text", "image", "model"]
Role = Literal["user", "assistant"]


@dataclass(frozen=True)
class Turn:
    """One earlier message of a conversation: what the user asked, or what was answered."""

    role: Role
    content: str


@dataclass(frozen=True)
class Citation:
    marker: int  # the n of [n]: 1-based position in Answer.sources
    source_id: str
    modality: str
    box: Region | None = None  # in a cited image, the region that supports the answer
    # In a cited text, the sentence that supports the answer: [start, end) in its `text`.
    span: tuple[int, int] | None = None
    # What judged that the source supports the answer (`JudgedBy`); None where nothing did.
    judged_by: JudgedBy | None = None
    # How surely: the text verifier's score, or the judge's P("yes").
    support: float | None = None


@dataclass
class Usage:
    """The tokens of one answer's generation, as OpenAI's `usage` counts them: the prompt the
    model read (instructions, sources and question in its chat template) and the tokens it
    wrote, up to where the writer stopped it (the end of its sentence), so an answer stopped
    early counts what was spent. The engine fills it in (`Engine.stream(usage=...)`)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass(frozen=True)
class Cut:
    """What the model said that its sources do not, left out of the answer, and why."""

    text: str
    reason: str


@dataclass
class Answer:
    text: str  # one sentence with [n] markers
    text_without_markers: str  # what WebQA's fluency and accuracy metrics score
    citations: list[Citation]
    sources: list[SourceLike]  # the numbered sources, [1]..[n] in order
    timings: dict[str, float] = field(default_factory=dict)
    generation_error: str | None = None  # set when the engine failed; text is then empty
    # True when no given source answers the question and the answer says so, citing nothing.
    abstained: bool = False
    # Where the citations come from once checked (see generation.verification.attribution): model,
    # verified, extractive, declined or unsupported; "" before checking or without an answer.
    attribution: str = ""
    cut: list[Cut] = field(default_factory=list)  # the model's words left out, and why
    usage: Usage = field(default_factory=Usage)  # the generator's tokens for `text`
