"""What every route needs from the app state, the checks they share, and their error replies."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from fastapi import HTTPException, Request
from fastapi.concurrency import run_in_threadpool

from mmrag.core.settings import Settings
from mmrag.runtime.deadline import Deadline
from mmrag.service.schemas import AnswerRequest, ErrorOut, SearchRequest, TurnIn


def error(description: str) -> dict[str, Any]:
    return {"model": ErrorOut, "description": description}


NOT_FOUND = {404: error("no such source, or it has no image")}
# What a route that takes a body and admits it through a queue can answer besides 200.
ERRORS = {
    408: error("the request's head or body did not arrive within head_timeout_s/body_timeout_s"),
    413: error("request body larger than the service's max_body_bytes"),
    422: error("invalid request: the detail names the field and the problem"),
    429: error("at capacity; retry after the Retry-After header's seconds"),
    431: error("request head larger than max_head_bytes, or more than max_headers headers"),
}
# How often a request at work checks whether its client is still there.
DISCONNECT_POLL_S = 0.25

T = TypeVar("T")
LOG = logging.getLogger("uvicorn.error")  # printed with uvicorn's own lines


def quoted(value: str, limit: int = 64) -> str:
    """A client's value as an error names it: whole when short, else its start and its length,
    so that a 5,000-digit id is not sent back whole."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value):,} characters)"


def settings_of(request: Request) -> Settings:
    return request.app.state.settings


def check_question_length(request: Request, question: str) -> None:
    limit = settings_of(request).max_question_chars
    if len(question) > limit:
        raise HTTPException(422, f"question longer than {limit} characters")


def check_k(request: Request, k: int | None) -> None:
    """Bounded work per request: k candidates cost k records read and, for answers, scored."""
    limit = settings_of(request).max_k
    if k is not None and k > limit:
        raise HTTPException(422, f"k must be at most {limit}")


def check_search_request(request: Request, body: SearchRequest) -> None:
    check_question_length(request, body.question)
    check_k(request, body.k)


def check_answer_request(request: Request, body: AnswerRequest) -> None:
    check_question_length(request, body.question)
    check_k(request, body.k)
    limit = settings_of(request).max_sources_limit
    if body.max_sources is not None and body.max_sources > limit:
        raise HTTPException(422, f"max_sources must be at most {limit}")


def check_conversation(request: Request, turns: Sequence[TurnIn]) -> None:
    """Bounded work per request: a conversation is read whole to resolve a follow-up."""
    settings = settings_of(request)
    if len(turns) > settings.max_turns:
        raise HTTPException(422, f"conversation: more than {settings.max_turns} turns")
    for number, turn in enumerate(turns):
        if len(turn.content) > settings.max_message_chars:
            raise HTTPException(
                422,
                f"conversation.{number}: longer than {settings.max_message_chars} characters",
            )


async def while_connected(request: Request, deadline: Deadline, work: Callable[[], T]) -> T:
    """`work()` in the thread pool; if the client leaves meanwhile, `deadline` is cancelled, so
    the work (which checks it) stops early, and its result goes nowhere. The caller's slot is
    held until the work has stopped: until then it still occupies the OCR or the engine."""
    running = asyncio.ensure_future(run_in_threadpool(work))
    while not deadline.cancelled:
        done, _ = await asyncio.wait({running}, timeout=DISCONNECT_POLL_S)
        if done:
            break
        if await request.is_disconnected():
            deadline.cancel()
            LOG.info("%s %s: the client left; its work stops", request.method, request.url.path)
    return await running
