"""The OpenAI chat protocol as mmrag speaks it: request, response, stream chunks and errors.

Shaped after the OpenAI API reference and vLLM's OpenAI server, so that any client of that
protocol (the `openai` SDK, Open WebUI, LibreChat, agent frameworks) talks to `mmrag serve`
unchanged. The answer is the message's content, its `[n]` markers included; what a RAG client
also wants travels beside it, as search-grounded APIs return it: `citations`, `sources`, the
resolved `question`, `attribution`, `abstained`, `generation_error` and `timings` (on the
response, and on the last chunk of a stream), and `usage` counts the generator's tokens as
every OpenAI-compatible server does. `stop` is honoured (the content ends before the first
stop sequence). A request the service cannot serve as asked is refused with a 400 rather than
half-served: more than one choice (`n`), a `response_format` other than text, log
probabilities, a logit bias, a forced tool call, audio. Fields that only tune sampling or
name the caller (`top_p`, penalties, `seed`, `user`, tools it may not call ...) are ignored:
the answer is the checked one whatever they say. The messages an agent framework sends (tool
results, an assistant's tool calls or refusal, a user message that is only an image) are read
as the conversation they are.
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from mmrag.generation.types import Usage
from mmrag.service.schemas import (
    AnswerResponse,
    CitationOut,
    Count,
    CutOut,
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


class RefusalPart(BaseModel):
    """An assistant's refusal, as OpenAI's API returns it and clients send it back."""

    model_config = ConfigDict(extra="ignore")

    type: Literal["refusal"]
    refusal: Text


ContentPart = Annotated[TextPart | ImagePart | RefusalPart, Field(discriminator="type")]


class ChatMessage(BaseModel):
    """One message. A `tool` message (a tool's result) and an assistant's `tool_calls` or
    `refusal` are conversation like any other turn: what they say is context, never the
    question."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Text | list[ContentPart] | None = None
    refusal: Text | None = None
    tool_calls: list[dict[str, Any]] | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            parts = [self.content]
        else:
            parts = [
                part.text if isinstance(part, TextPart) else part.refusal
                for part in self.content or []
                if not isinstance(part, ImagePart)
            ]
        if self.refusal:
            parts.append(self.refusal)
        return "\n".join(parts)

    def image_urls(self) -> list[str]:
        if not isinstance(self.content, list):
            return []
        return [part.image_url.url for part in self.content if isinstance(part, ImagePart)]


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: JsonBool = Field(
        False, description="a last chunk (no choices) carries the completion's `usage`"
    )


class ResponseFormat(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: str = Field(description="only 'text' is served: the answer is one cited sentence")


MAX_STOP = 4  # stop sequences, as OpenAI allows


class ChatRequest(BaseModel):
    """`messages`: the conversation, ending with the user's question (or with an agent's tool
    round after it: its assistant `tool_calls` and their `tool` results); its latest image
    part is the photo asked about. System and developer messages are read past: the
    service's own instructions are fixed."""

    model_config = ConfigDict(extra="ignore")

    model: str = Field(description="an id from GET /v1/models")
    messages: list[ChatMessage] = Field(min_length=1)
    stream: JsonBool = False
    stream_options: StreamOptions | None = None
    max_tokens: Count | None = Field(
        None,
        description="the most tokens the model may write, up to the service's max_tokens; a "
        "source sentence or decline that replaces an unsupported answer is not cut "
        "(`max_tokens_note` then says so)",
    )
    max_completion_tokens: Count | None = Field(None, description="as max_tokens")
    temperature: float | None = Field(None, ge=0, le=2)
    n: Count | None = Field(None, description="choices to write: only 1 is served")
    response_format: ResponseFormat | None = Field(
        None, description="only {'type': 'text'}; JSON output is refused, not half-served"
    )
    stop: Text | list[Text] | None = Field(
        None,
        description=f"up to {MAX_STOP} sequences: the content ends before the first of them "
        "(finish_reason 'stop')",
    )
    logprobs: JsonBool | None = Field(None, description="not served: true is refused")
    top_logprobs: int | None = Field(None, description="not served: above 0 is refused")
    logit_bias: dict[str, float] | None = Field(None, description="not served: refused")
    tool_choice: str | dict[str, Any] | None = Field(
        None, description="'none' or 'auto' (no tool is ever called); a forced call is refused"
    )
    modalities: list[str] | None = Field(None, description="['text'] only")
    audio: dict[str, Any] | None = Field(None, description="not served: refused")
    sources_in_content: JsonBool = Field(
        True,
        description="append the cited sources to the content, after the answer, as footnotes "
        "a plain-text client shows ('Sources:' then '[n] title — page or image URL'); false "
        "for a client that renders the `citations` and `sources` fields itself",
    )

    def refused(self) -> str | None:
        """Why the request asks for an output this service does not write, if it does: one
        line naming the field."""
        if self.n is not None and self.n > 1:
            return f"n: only one choice is written, got {self.n}"
        if self.response_format is not None and self.response_format.type != "text":
            kind = self.response_format.type[:40]
            return f"response_format: only 'text' is served, got {kind!r}"
        if isinstance(self.stop, list) and len(self.stop) > MAX_STOP:
            return f"stop: at most {MAX_STOP} sequences"
        if self.stop_sequences() and not all(self.stop_sequences()):
            return "stop: a stop sequence must not be empty"
        if self.logprobs or (self.top_logprobs or 0) > 0:
            return "logprobs: log probabilities are not served"
        if self.logit_bias:
            return "logit_bias: not served"
        if self.tool_choice is not None and self.tool_choice not in ("none", "auto"):
            return "tool_choice: this service calls no tools"
        if self.modalities is not None and set(self.modalities) - {"text"}:
            return "modalities: only 'text' is served"
        if self.audio is not None:
            return "audio: not served"
        return None

    def stop_sequences(self) -> list[str]:
        return [self.stop] if isinstance(self.stop, str) else list(self.stop or [])


def cut_at_stop(content: str, stops: list[str]) -> tuple[str, bool]:
    """The content before the first of the stop sequences, and whether one was found."""
    found = [at for at in (content.find(stop) for stop in stops) if at >= 0]
    return (content[: min(found)], True) if found else (content, False)


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


FinishReason = Literal["stop", "length"]


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: FinishReason = "stop"


class CompletionUsage(BaseModel):
    """The generator's tokens for this answer: the prompt it read (instructions, sources and
    question in its chat template) and the tokens it wrote. Not counted: the judge's and a
    follow-up rewrite's calls, and text the check put in place of the model's sentence."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int

    @classmethod
    def of(cls, usage: Usage) -> CompletionUsage:
        total = usage.prompt_tokens + usage.completion_tokens
        return cls(
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            total_tokens=total,
        )


class Grounding(BaseModel):
    """mmrag's fields beside the message: where the answer comes from."""

    citations: list[CitationOut] = Field(description="the answer's [n] markers and what they cite")
    sources: list[SourceOut] = Field(description="the numbered sources, [1] first")
    question: str = Field(description="the question answered, a follow-up made standalone")
    attribution: str = Field(description="as /v1/answer's: model, verified, extractive, ...")
    cut: list[CutOut] = Field(
        default_factory=list, description="as /v1/answer's: what was left out of the answer"
    )
    abstained: bool = Field(description="true when no source supports an answer")
    generation_error: str | None = None
    timings: dict[str, float | str] = Field(description="as /v1/answer's")
    max_tokens_note: str | None = Field(
        None,
        description="set when the request's max_tokens does not bound the content: the "
        "model's sentence was unsupported and a source sentence (or the decline) took its place",
    )

    @classmethod
    def of(cls, answered: AnswerResponse, max_tokens_note: str | None) -> dict[str, Any]:
        fields = answered.model_dump(include=set(cls.model_fields))
        return cls(**fields, max_tokens_note=max_tokens_note).model_dump()


class ChatCompletion(Grounding):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: CompletionUsage


class Delta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChunkChoice(BaseModel):
    index: int = 0
    delta: Delta
    finish_reason: FinishReason | None = None


class ChatCompletionChunk(BaseModel):
    """A streamed piece; the one with a `finish_reason` also carries the grounding fields of
    ChatCompletion. With `stream_options.include_usage`, every chunk has `usage`: null but
    the last, which has no choices and the completion's usage, as OpenAI streams it."""

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


ERROR_TYPES = {404: "not_found_error", 429: "rate_limit_error", 500: "server_error"}
# The routes that answer errors in OpenAI's shape; every other route says {"detail": ...}.
OPENAI_PATHS = frozenset({"/v1/models", "/v1/chat/completions"})


def error_body(status: int, message: str) -> dict[str, Any]:
    kind = ERROR_TYPES.get(status, "invalid_request_error")
    return OpenAIError(error=ErrorDetail(message=message, type=kind, code=str(status))).model_dump()


def error_content(path: str, status: int, message: str) -> dict[str, Any]:
    """An error reply's body for a request to `path`, whoever sends it (a route, the body
    limit, the HTTP protocol): OpenAI's error object on its routes, else `{"detail"}`."""
    return error_body(status, message) if path in OPENAI_PATHS else {"detail": message}


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def now() -> int:
    return int(time.time())
