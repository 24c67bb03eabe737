"""GET /v1/models and POST /v1/chat/completions: the OpenAI chat protocol, answered by mmrag.

A chat front end (Open WebUI, LibreChat), an agent framework or the `openai` SDK points its base
URL here and gets cited answers: the conversation's last user message is the question, the
messages before it the conversation that resolves a follow-up, and the latest image part the
photo asked about. Admission, limits, the deadline and metrics are /v1/answer's.

A streamed answer's content is the checked answer. Verification may cut, move or replace the
model's sentence, and a chat client keeps whatever content it was sent, so the deltas follow
the check rather than the model: the role opens the stream at once, the answer follows once it
is checked, and the last chunk carries the citations and sources. The content, streamed or
not, ends with the cited sources as footnotes unless the request says `sources_in_content:
false` (service/footnotes.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.concurrency import run_in_threadpool

from mmrag.core.pipeline import QAResult, QARun
from mmrag.generation.engines.base import decode_data_url
from mmrag.generation.errors import GenerationError
from mmrag.generation.types import Turn
from mmrag.indexes.errors import InputError
from mmrag.service.footnotes import footnotes, without_footnotes
from mmrag.service.openai_chat import (
    OPENAI_PATHS,
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    ChatMessage,
    ChatRequest,
    Choice,
    ChunkChoice,
    CompletionUsage,
    Delta,
    FinishReason,
    Grounding,
    ModelCard,
    ModelList,
    OpenAIError,
    completion_id,
    cut_at_stop,
    error_body,
    now,
)
from mmrag.service.routes.answering import (
    admit,
    answer_once,
    read_photo,
    respond,
    stream,
)
from mmrag.service.routes.common import ERRORS, quoted, settings_of
from mmrag.service.schemas import AnswerResponse, visible

router = APIRouter()


def openai_error(description: str) -> dict[str, Any]:
    return {"model": OpenAIError, "description": description}


# Every error of the route is in OpenAI's shape, the server's own (408, 413) included; a
# head too large for the server to read (431) keeps the server's shape.
CHAT_ERRORS = {
    431: ERRORS[431],
    408: openai_error(ERRORS[408]["description"]),
    413: openai_error(ERRORS[413]["description"]),
    400: openai_error(
        "invalid request: the message names the field and the problem, or an output this "
        "service does not write (n above 1, a response_format other than text, logprobs ...)"
    ),
    404: openai_error("no such model: see GET /v1/models"),
    422: openai_error("the attached image does not decode, or is too large"),
    429: openai_error("at capacity; retry after the Retry-After header's seconds"),
}


def served_model(request: Request) -> str:
    """One model per served index: its directory's name."""
    return f"mmrag/{settings_of(request).index.name}"


def openai_error_response(request: Request, status: int, message: str) -> dict[str, Any] | None:
    """The body of an error on the OpenAI routes, in OpenAI's shape; None elsewhere."""
    return error_body(status, message) if request.url.path in OPENAI_PATHS else None


@router.get("/v1/models", response_model=ModelList)
async def models(request: Request) -> ModelList:
    """The index this service answers from, as the model a client names."""
    started = request.app.state.started
    return ModelList(data=[ModelCard(id=served_model(request), created=started)])


IMAGE_QUESTION = "What does this image show?"  # asked of a photo sent without words


def conversation_of(request: Request, body: ChatRequest) -> tuple[str, list[Turn], bytes | None]:
    """The question, the turns before it, and the latest photo among the user's messages;
    400 naming the message at fault.

    The question is the last user message: after it may come only an agent's tool round (an
    assistant's `tool_calls`, `tool` results), which is context. A user message that is only
    an image asks about it the question of the user message just before it, or, with none,
    IMAGE_QUESTION."""
    settings = settings_of(request)
    messages = body.messages
    if len(messages) > settings.max_turns:
        raise HTTPException(400, f"messages: more than {settings.max_turns}")
    asking = len(messages) - 1
    while asking >= 0 and _tool_round(messages[asking]):
        asking -= 1
    if asking < 0 or messages[asking].role != "user":
        at = len(messages) - 1 if asking < 0 else asking
        raise HTTPException(400, f"messages.{at}: the last message must be the user's question")
    question = messages[asking].text().strip()
    photo = latest_photo(messages[: asking + 1])
    if not visible(question) and messages[asking].image_urls():
        before = messages[asking - 1] if asking else None
        if before is not None and before.role == "user" and visible(before.text()):
            asking -= 1
            question = before.text().strip()
        else:
            question = IMAGE_QUESTION
    if not visible(question):  # zero-width spaces are no question
        raise HTTPException(400, f"messages.{asking}: the question has no text")
    if len(question) > settings.max_question_chars:
        limit = settings.max_question_chars
        raise HTTPException(400, f"messages.{asking}: question longer than {limit} characters")
    turns = []
    for number, message in enumerate(messages[:asking]):
        if message.role in ("system", "developer"):
            continue  # the service's own instructions are fixed
        text = without_footnotes(message.text()).strip()
        if len(text) > settings.max_message_chars:
            limit = settings.max_message_chars
            raise HTTPException(400, f"messages.{number}: longer than {limit} characters")
        if text:  # a tool's result is what the assistant's side brought to the conversation
            turns.append(Turn("user" if message.role == "user" else "assistant", text))
    return question, turns, photo


def _tool_round(message: ChatMessage) -> bool:
    return message.role == "tool" or (message.role == "assistant" and bool(message.tool_calls))


def latest_photo(messages: list[ChatMessage]) -> bytes | None:
    for number in reversed(range(len(messages))):
        message = messages[number]
        urls = message.image_urls() if message.role == "user" else []
        if urls:
            try:
                return decode_data_url(urls[-1])
            except GenerationError as exc:
                raise HTTPException(400, f"messages.{number}: {exc}") from None
    return None


# Attributions whose sentence is not the model's: a source's sentence, or the decline.
REPLACED = frozenset({"extractive", "declined"})


@dataclass(frozen=True)
class Reply:
    """What a completion says, streamed or not: the content (the checked answer, and its
    footnotes unless turned off), why it ended, the generator's tokens, and a note when
    max_tokens does not bound the content."""

    content: str
    finish_reason: FinishReason
    usage: CompletionUsage
    max_tokens_note: str | None

    @classmethod
    def of(
        cls, result: QAResult, answered: AnswerResponse, body: ChatRequest, request: Request
    ) -> Reply:
        asked = body.max_completion_tokens or body.max_tokens
        limit = min(asked or settings_of(request).max_tokens, settings_of(request).max_tokens)
        usage = result.answer.usage
        full = usage.completion_tokens >= limit  # the model stopped at its limit
        replaced = answered.attribution in REPLACED
        note = None
        if asked is not None and replaced:
            what = "the decline" if answered.abstained else "the source sentence that answers it"
            cut = f", cut at max_tokens {asked}," if full else ""
            note = (
                f"the model's sentence{cut} was not supported by its sources; {what} took its "
                "place, which max_tokens does not cut"
            )
        ended = "length" if full and not replaced and not answered.generation_error else "stop"
        content = answered.answer
        if body.sources_in_content:
            content += footnotes(answered, str(request.base_url))
        content, stopped = cut_at_stop(content, body.stop_sequences())
        return cls(content, "stop" if stopped else ended, CompletionUsage.of(usage), note)


@router.post(
    "/v1/chat/completions",
    response_model=ChatCompletion,
    responses={200: {"content": {"text/event-stream": {}}}, **CHAT_ERRORS},
)
async def chat_completions(request: Request, body: ChatRequest):
    """The cited answer to the conversation's last user message, as a chat completion (or,
    with `stream: true`, `chat.completion.chunk` events ending with `data: [DONE]`)."""
    model = served_model(request)
    if body.model != model:
        raise HTTPException(
            404, f"the model {quoted(body.model)} does not exist; this serves {model!r}"
        )
    if (refused := body.refused()) is not None:
        raise HTTPException(400, refused)
    question, turns, photo = conversation_of(request, body)
    options: dict[str, Any] = {
        "conversation": turns,
        "max_tokens": body.max_completion_tokens or body.max_tokens,
        "temperature": body.temperature or 0.0,
    }
    admission = await admit(request)
    if photo is not None:
        options["image"] = await read_photo(request, admission, photo)
    if body.stream:
        return stream(
            request, admission, question, options, partial(chunks, request=request, body=body)
        )
    result = await answer_once(request, admission, question, options)
    answered = respond(result, request)
    reply = Reply.of(result, answered, body, request)
    message = AssistantMessage(content=reply.content)
    return ChatCompletion(
        id=completion_id(),
        created=now(),
        model=model,
        choices=[Choice(message=message, finish_reason=reply.finish_reason)],
        usage=reply.usage,
        **Grounding.of(answered, reply.max_tokens_note),
    )


def _event(value: dict[str, Any]) -> str:
    return f"data: {json.dumps(value, ensure_ascii=False)}\n\n"


async def chunks(run: QARun, request: Request, body: ChatRequest) -> AsyncIterator[str]:
    """The role at once; the checked answer a word at a time; the grounding; with
    `stream_options.include_usage`, the usage; [DONE]. The content is the non-streamed one."""
    ident, created, model = completion_id(), now(), served_model(request)
    with_usage = body.stream_options is not None and body.stream_options.include_usage

    def chunk(
        choices: list[ChunkChoice], usage: CompletionUsage | None = None, **extra: Any
    ) -> str:
        piece = ChatCompletionChunk(id=ident, created=created, model=model, choices=choices)
        event = piece.model_dump() | extra
        for choice in event["choices"]:
            choice["delta"] = {k: v for k, v in choice["delta"].items() if v is not None}
        if with_usage:  # as OpenAI: null on every chunk but the last
            event["usage"] = None if usage is None else usage.model_dump()
        return _event(event)

    yield chunk([ChunkChoice(delta=Delta(role="assistant", content=""))])
    try:
        result = await run_in_threadpool(run.wait)
    except InputError as exc:
        yield _event(error_body(400, str(exc)))
        yield "data: [DONE]\n\n"
        return
    answered = AnswerResponse.from_result(result)
    reply = Reply.of(result, answered, body, request)
    for word in re.findall(r"\S+\s*|\s+", reply.content):
        yield chunk([ChunkChoice(delta=Delta(content=word))])
    last = ChunkChoice(delta=Delta(), finish_reason=reply.finish_reason)
    yield chunk([last], **Grounding.of(answered, reply.max_tokens_note))
    if with_usage:
        yield chunk([], reply.usage)
    yield "data: [DONE]\n\n"
