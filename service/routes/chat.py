"""GET /v1/models and POST /v1/chat/completions: the OpenAI chat protocol, answered by mmrag.

A chat front end (Open WebUI, LibreChat), an agent framework or the `openai` SDK points its base
URL here and gets cited answers: the conversation's last user message is the question, the
messages before it the conversation that resolves a follow-up, and the latest image part the
photo asked about. Admission, limits, the deadline and metrics are /v1/answer's.

A streamed answer's content is the checked answer. Verification may cut, move or replace the
model's sentence, and a chat client keeps whatever content it was sent, so the deltas follow
the check rather than the model: the role opens the stream at once, the answer follows once it
is checked, and the last chunk carries the citations and sources.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.concurrency import run_in_threadpool

from mmrag.core.pipeline import QARun
from mmrag.generation.engines.base import decode_data_url
from mmrag.generation.errors import GenerationError
from mmrag.generation.types import Turn
from mmrag.indexes.errors import InputError
from mmrag.service.openai_chat import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    ChatRequest,
    Choice,
    ChunkChoice,
    Delta,
    Grounding,
    ModelCard,
    ModelList,
    OpenAIError,
    completion_id,
    error_body,
    now,
)
from mmrag.service.routes.answering import (
    ReleasingStream,
    admit,
    answer_once,
    read_photo,
    respond,
    start,
)
from mmrag.service.routes.common import ERRORS, settings_of

router = APIRouter()
OPENAI_PATHS = frozenset({"/v1/models", "/v1/chat/completions"})


def openai_error(description: str) -> dict[str, Any]:
    return {"model": OpenAIError, "description": description}


# The server's own refusals (before a route runs) keep their shape; the route's are OpenAI's.
CHAT_ERRORS = {
    **{status: ERRORS[status] for status in (408, 413, 431)},
    400: openai_error("invalid request: the message names the field and the problem"),
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


def conversation_of(request: Request, body: ChatRequest) -> tuple[str, list[Turn], bytes | None]:
    """The question (the last message, the user's), the turns before it, and the latest
    photo among the user's messages; 400 naming the message at fault."""
    settings = settings_of(request)
    messages = body.messages
    if len(messages) > settings.max_turns:
        raise HTTPException(400, f"messages: more than {settings.max_turns}")
    last = len(messages) - 1
    if messages[last].role != "user":
        raise HTTPException(400, f"messages.{last}: the last message must be the user's question")
    question = messages[last].text().strip()
    if not question:
        raise HTTPException(400, f"messages.{last}: the question has no text")
    if len(question) > settings.max_question_chars:
        limit = settings.max_question_chars
        raise HTTPException(400, f"messages.{last}: question longer than {limit} characters")
    turns = []
    for number, message in enumerate(messages[:last]):
        if message.role not in ("user", "assistant"):
            continue  # the service's own instructions are fixed
        text = message.text()
        if len(text) > settings.max_message_chars:
            limit = settings.max_message_chars
            raise HTTPException(400, f"messages.{number}: longer than {limit} characters")
        turns.append(Turn(message.role, text))
    return question, turns, latest_photo(messages)


def latest_photo(messages: list) -> bytes | None:
    for number in reversed(range(len(messages))):
        message = messages[number]
        urls = message.image_urls() if message.role == "user" else []
        if urls:
            try:
                return decode_data_url(urls[-1])
            except GenerationError as exc:
                raise HTTPException(400, f"messages.{number}: {exc}") from None
    return None


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
        raise HTTPException(404, f"the model {body.model!r} does not exist; this serves {model!r}")
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
        run, release = start(request, admission, question, options)
        return ReleasingStream(chunks(run, request, model), release)
    answered = respond(await answer_once(request, admission, question, options), request)
    return ChatCompletion(
        id=completion_id(),
        created=now(),
        model=model,
        choices=[Choice(message=AssistantMessage(content=answered.answer))],
        **Grounding.of(answered),
    )


def _event(value: dict[str, Any]) -> str:
    return f"data: {json.dumps(value, ensure_ascii=False)}\n\n"


async def chunks(run: QARun, request: Request, model: str) -> AsyncIterator[str]:
    """The role at once; the checked answer a word at a time; the grounding; [DONE]."""
    ident, created = completion_id(), now()

    def chunk(delta: Delta, **extra: Any) -> str:
        choice = ChunkChoice(delta=delta, finish_reason="stop" if extra else None)
        piece = ChatCompletionChunk(id=ident, created=created, model=model, choices=[choice])
        event = piece.model_dump() | extra
        event["choices"][0]["delta"] = delta.model_dump(exclude_none=True)
        return _event(event)

    yield chunk(Delta(role="assistant", content=""))
    try:
        result = await run_in_threadpool(run.wait)
    except InputError as exc:
        yield _event(error_body(400, str(exc)))
        yield "data: [DONE]\n\n"
        return
    answered = respond(result, request)
    for word in re.findall(r"\S+\s*", answered.answer):
        yield chunk(Delta(content=word))
    yield chunk(Delta(), **Grounding.of(answered))
    yield "data: [DONE]\n\n"
