"""HTTP request and response bodies: the public contract, published at /openapi.json."""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, ValidationInfo
from pydantic_core import PydanticCustomError

from mmrag.indexes.sources import Modality, Source
from mmrag.retrieval.types import Candidate, ModalityFilter

if TYPE_CHECKING:  # the pipeline pulls in generation; search-only callers must not need it
    from mmrag.core.pipeline import QAResult
    from mmrag.generation.grounding import Grounding
    from mmrag.generation.types import Citation, Region, Turn


def valid_text(text: str) -> str:
    """Text every later stage can encode: JSON lets a client send lone UTF-16 surrogates
    ("\\ud800"), which no tokenizer or UTF-8 writer accepts."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"text is not valid Unicode (a lone surrogate at character {exc.start})"
        ) from None
    return text


# Whitespace as Python's str.isspace and JavaScript's \\s count it together, spelled out so
# that the published pattern means the same to every client's regex engine.
_BLANK = r"\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
# And what shows nothing: control characters, zero-width and direction marks, word joiners,
# variation selectors, the soft hyphen (a question of zero-width spaces was answered).
_INVISIBLE = (
    r"\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f\xad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    r"\ufe00-\ufe0f"
)
NOT_BLANK = f"[^{_BLANK}{_INVISIBLE}]"
_NOT_BLANK = re.compile(NOT_BLANK)


def visible(text: str) -> bool:
    """Whether the text shows anything: a character that is no blank, control, zero-width or
    other invisible one."""
    return _NOT_BLANK.search(text) is not None


def _not_blank(question: str) -> str:
    if not visible(valid_text(question)):
        raise ValueError("question must not be empty (it has no visible character)")
    return question.strip()


Question = Annotated[
    str,
    AfterValidator(_not_blank),
    Field(
        min_length=1,
        description="natural-language question (not blank)",
        json_schema_extra={"pattern": NOT_BLANK},
    ),
]


class ErrorOut(BaseModel):
    """Every error reply: one line saying what is wrong."""

    detail: str


def _from_a_form(info: ValidationInfo) -> bool:
    return bool((info.context or {}).get("form"))


def _json_integer(value: Any, info: ValidationInfo) -> Any:
    """JSON Schema's integer (3, or 3.0), never `true` or `"3"` as lax pydantic would take
    them, except from a form, whose every field is text."""
    if isinstance(value, bool | str) and not _from_a_form(info):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


def _json_boolean(value: Any, info: ValidationInfo) -> Any:
    """`true` or `false` only: lax pydantic reads `"yes"`, `"on"` and 1 as true."""
    if not isinstance(value, bool) and not _from_a_form(info):
        raise PydanticCustomError("bool_type", "Input should be a valid boolean")
    return value


Count = Annotated[int, Field(ge=1), BeforeValidator(_json_integer)]
JsonBool = Annotated[bool, BeforeValidator(_json_boolean)]


class SearchRequest(BaseModel):
    question: Question
    k: Count = Field(10, description="number of hits")
    modality: ModalityFilter = Field("all", description="restrict hits to one modality")


class TurnIn(BaseModel):
    """An earlier message of the conversation: a question asked, or the answer it got."""

    role: Literal["user", "assistant"]
    content: Annotated[str, AfterValidator(valid_text)]

    def as_turn(self) -> Turn:
        from mmrag.generation.types import Turn

        return Turn(self.role, self.content)


def _conversation_from_a_form(value: Any, info: ValidationInfo) -> Any:
    """A form's field is text: there the conversation comes as a JSON array."""
    if isinstance(value, str) and _from_a_form(info):
        try:
            return json.loads(value)
        except ValueError:
            raise PydanticCustomError("json_invalid", "conversation: not a JSON array") from None
    return value


Conversation = Annotated[list[TurnIn], BeforeValidator(_conversation_from_a_form)]


class AnswerRequest(BaseModel):
    """Typed as JSON types are (`"stream": "yes"` is not true), except when validated with
    `context={"form": True}`: a multipart form's fields are all text."""

    question: Question
    k: Count | None = Field(None, description="candidates retrieved (default: rerank_k)")
    modality: ModalityFilter = Field("all", description="restrict sources to one modality")
    max_sources: Count | None = Field(None, description="most sources to cite")
    stream: JsonBool = Field(False, description="stream tokens as server-sent events")
    conversation: Conversation = Field(
        default_factory=list,
        description="the turns before this question, oldest first: a follow-up is answered as "
        "the standalone question it stands for (returned as `question`)",
    )


OCR_TEXT = "text read in the image by OCR, lines in reading order; empty when none"


class OcrLineOut(BaseModel):
    text: str
    confidence: float = Field(description="the OCR model's confidence, 0..1")
    box: list[list[int]] = Field(description="four [x, y] corners in image pixels, clockwise")


class SearchHit(BaseModel):
    source_id: str
    modality: Modality
    score: float
    title: str
    text: str
    url: str
    ocr_text: str = Field("", description=OCR_TEXT)

    @classmethod
    def from_candidate(cls, candidate: Candidate) -> SearchHit:
        source = candidate.source
        return cls(
            source_id=source.id,
            modality=source.modality,
            score=candidate.score,
            title=source.title,
            text=source.text,
            url=source.url,
            ocr_text=source.ocr_text,
        )


class SourceOut(BaseModel):
    source_id: str
    modality: Modality
    title: str
    text: str
    url: str
    image_url: str | None = Field(
        None, description="this service's route to the image bytes (none for an uploaded image)"
    )
    score: float | None = Field(None, description="relevance the reranker gave it")
    ocr_text: str = Field("", description=OCR_TEXT)
    ocr_lines: list[OcrLineOut] = Field(
        default_factory=list, description="the OCR lines, each with its confidence and box"
    )

    @classmethod
    def from_source(cls, source: Source, score: float | None = None) -> SourceOut:
        stored_image = source.modality == "image" and source.image_ref is not None
        return cls(
            source_id=source.id,
            modality=source.modality,
            title=source.title,
            text=source.text,
            url=source.url,
            image_url=f"/v1/sources/{source.id}/image" if stored_image else None,
            score=score,
            ocr_text=source.ocr_text,
            ocr_lines=[OcrLineOut(**line.to_dict()) for line in source.ocr],
        )


class BoxOut(BaseModel):
    """A region of an image, in that image's pixels."""

    left: float
    top: float
    right: float
    bottom: float
    score: float | None = Field(None, description="the detector's confidence; null for a VLM's")
    label: str = Field(description="what was looked for, or what the VLM named")

    @classmethod
    def from_region(cls, region: Region | None) -> BoxOut | None:
        return None if region is None else cls(**asdict(region))


class SpanOut(BaseModel):
    """Characters [start, end) of a source's `text`."""

    start: int
    end: int


class CitationOut(BaseModel):
    marker: int
    source_id: str
    modality: Modality
    box: BoxOut | None = Field(
        None,
        description="for a cited image, the region that supports the answer (when the service "
        "has a detector or grounding VLM)",
    )
    span: SpanOut | None = Field(
        None, description="for a cited text, the sentence of its `text` that supports the answer"
    )
    # generation.types.JudgedBy, spelled out: search-only callers must not import generation.
    judged_by: Literal["text", "image", "model"] | None = Field(
        None,
        description="what found that the source supports the answer: its text (title, caption "
        "or snippet, OCR text), a judge that looked at its image, or a judge model that read "
        "its text where the text verifier was unsure; null where nothing judged",
    )
    support: float | None = Field(
        None, description="how surely: the text verifier's score, or the judge's P(yes)"
    )

    @classmethod
    def from_citation(cls, citation: Citation) -> CitationOut:
        span = citation.span
        return cls(
            marker=citation.marker,
            source_id=citation.source_id,
            modality=citation.modality,
            box=BoxOut.from_region(citation.box),
            span=None if span is None else SpanOut(start=span[0], end=span[1]),
            judged_by=citation.judged_by,
            support=citation.support,
        )


class CutOut(BaseModel):
    text: str = Field(description="words of the model's sentence left out of the answer")
    reason: str = Field(description="why: what no cited source says, or that it was repeated")


class AnswerResponse(BaseModel):
    question: str = Field(
        description="the question answered: as asked, or a follow-up made to stand alone with "
        "the conversation before it"
    )
    answer: str = Field(description="one sentence with [n] citation markers")
    answer_without_markers: str = Field(description="the sentence as WebQA scoring reads it")
    citations: list[CitationOut]
    sources: list[SourceOut] = Field(description="the numbered sources, [1] first")
    timings: dict[str, float | str] = Field(
        description="seconds per stage (`retrieve_s`, `generate_s`, `verify_s` ...); "
        "`stopped_in` names the stage the deadline stopped (ocr, resolve, retrieve, generate, "
        "verify or ground), when it did"
    )
    generation_error: str | None = Field(
        None, description="why no answer was written; the sources are still the retrieved ones"
    )
    abstained: bool = Field(
        False,
        description="true when no source supports an answer: the answer says the indexed "
        "sources do not answer the question, cites nothing, and `sources` are the nearest ones",
    )
    attribution: str = Field(
        "",
        description="where the citations come from once each was checked against its source: "
        "model (its own, verified), verified (a source the verifier found), extractive (a "
        "source sentence replaced an unsupported answer), declined, unsupported (kept uncited "
        "with abstain=never); empty without an answer",
    )
    cut: list[CutOut] = Field(
        default_factory=list,
        description="what the model wrote that its sources do not say, left out of the answer "
        "(a modifier, a clause, or the whole sentence a source's own replaced), and why",
    )

    @classmethod
    def from_result(cls, result: QAResult) -> AnswerResponse:
        answer, relevance = result.answer, result.relevance()
        return cls(
            question=result.question,
            answer=answer.text,
            answer_without_markers=answer.text_without_markers,
            citations=[CitationOut.from_citation(c) for c in answer.citations],
            sources=[SourceOut.from_source(s, relevance.get(s.id)) for s in answer.sources],
            timings=result.timings.as_dict(),
            generation_error=answer.generation_error,
            abstained=answer.abstained,
            attribution=answer.attribution,
            cut=[CutOut(text=cut.text, reason=cut.reason) for cut in answer.cut],
        )


class SearchResponse(BaseModel):
    hits: list[SearchHit]
    took_ms: float


class OcrStatus(BaseModel):
    images: int = Field(description="images the index build read")
    images_with_text: int = Field(description="images with text kept above the threshold")
    lines: int = Field(description="lines of text kept")
    min_confidence: float


class Health(BaseModel):
    status: str
    sources: int
    retrievers: list[str]
    fusion: str
    image_vectors: str = Field(description="'clip', or how images are reached without CLIP")
    ocr: OcrStatus | None = Field(
        None, description="the text read in images at index build; null: built without --ocr"
    )


class Readiness(BaseModel):
    ready: bool
    index: str = Field(description="the index directory's name (paths stay on the server)")
    sources: int
    retrievers: list[str]
    fusion: str
    image_vectors: str
    reranker: str
    engine: str
    model: str
    engine_reachable: bool


class RationaleResponse(BaseModel):
    rationale: str = Field(description="one or two sentences of reasoning")
    direct_answer: str
    multiple_choice: str | None = Field(None, description="one of the given choices")
    choice_scores: dict[str, float] | None = None
    timings: dict[str, float]


class GroundResponse(BaseModel):
    box: BoxOut | None = Field(description="null when nothing could be boxed; `error` says why")
    width: int = Field(description="the image's width in pixels")
    height: int = Field(description="the image's height in pixels")
    strategy: str = Field(description="detector (the object named, then detected) or vlm")
    query: str = Field(description="what was looked for: the object named, or the question")
    error: str | None = None
    timings: dict[str, float]

    @classmethod
    def from_grounding(
        cls, found: Grounding, strategy: str, size: tuple[int, int]
    ) -> GroundResponse:
        return cls(
            box=BoxOut.from_region(found.region),
            width=size[0],
            height=size[1],
            strategy=strategy,
            query=found.query,
            error=found.error,
            timings=found.timings,
        )
