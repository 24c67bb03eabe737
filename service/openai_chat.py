"""The OpenAI chat protocol as mmrag speaks it: request, response, stream chunks and errors.

Shaped after the OpenAI API reference and vLLM's OpenAI server, so that any client of that
protocol (the `openai` SDK, Open WebUI, LibreChat, agent frameworks) talks to `mmrag serve`
unchanged. The answer is the message's content, its `[n]` markers included; what a RAG client
also wants travels beside it, as search-grounded APIs return it: `citations`, `sources`, the
resolved `question`, `attribution`, `abstained`, `generation_error` and `timings` (on the
response, and on the last chunk of a stream). Fields a client sends that mmrag has no use for
(`n`, `top_p`, `user`, tools ...) are ignored.
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from mmrag.service.schemas import (
    AnswerResponse,
    CitationOut,
    Count,
    JsonBool,
    SourceOut,
    valid_text,
)

Text = Annotated[str, AfterValidator(valid_text)]


class TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["text"]
    text: Text


class ImageURL(BaseModel):
    model_config = ConfigDict(extra="ignore")

    url: str = Field(description="a data: URL (base64); this service fetches nothing")


class ImagePart(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: Literal["image_url"]
    image_url: ImageURL


ContentPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant"]
    content: Text | list[ContentPart] | None = None

    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(part.text for part in self.content if isinstance(part, TextPart))

    def image_urls(self) -> list[str]:
        if not isinstance(self.content, list):
            return []
        return [part.image_url.url for part in self.content if isinstance(part, ImagePart)]


class ChatRequest(BaseModel):
    """`messages`: the conversation, ending with the user's question; its latest image part
    is the photo asked about. System and developer messages are read past: the service's own
    instructions are fixed."""

    model_config = ConfigDict(extra="ignore")

    model: str = Field(description="an id from GET /v1/models")
    messages: list[ChatMessage] = Field(min_length=1)
    stream: JsonBool = False
    max_tokens: Count | None = Field(None, description="at most the service's max_tokens")
    max_completion_tokens: Count | None = Field(None, description="as max_tokens")
    temperature: float | None = Field(None, ge=0, le=2)


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "mmrag"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: Literal["stop"] = "stop"


class Grounding(BaseModel):
    """mmrag's fields beside the message: where the answer comes from."""

    citations: list[CitationOut] = Field(description="the answer's [n] markers and what they cite")
    sources: list[SourceOut] = Field(description="the numbered sources, [1] first")
    question: str = Field(description="the question answered, a follow-up made standalone")
    attribution: str = Field(description="as /v1/answer's: model, verified, extractive, ...")
    abstained: bool = Field(description="true when no source supports an answer")
    generation_error: str | None = None
    timings: dict[str, float]

    @classmethod
    def of(cls, answered: AnswerResponse) -> dict[str, Any]:
        return cls(**answered.model_dump(include=set(cls.model_fields))).model_dump()


class ChatCompletion(Grounding):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]


class Delta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChunkChoice(BaseModel):
    index: int = 0
    delta: Delta
    finish_reason: Literal["stop"] | None = None


class ChatCompletionChunk(BaseModel):
    """A streamed piece; the last one (`finish_reason: "stop"`) also carries the grounding
    fields of ChatCompletion."""

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class OpenAIError(BaseModel):
    """OpenAI's error object, which its SDKs read into their exceptions."""

    error: ErrorDetail


ERROR_TYPES = {404: "not_found_error", 429: "rate_limit_error"}


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = ERROR_TYPES.get(status, "invalid_request_error")
    return OpenAIError(error=ErrorDetail(message=message, type=kind, code=str(status))).model_dump()


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def now() -> int:
    return int(time.time())
