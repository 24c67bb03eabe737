"""POST /v1/answer: one cited sentence, as JSON or as server-sent events."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator

from fastapi import APIRouter, HTTPException, Request
from fastapi.concurrency import iterate_in_threadpool, run_in_threadpool
from fastapi.responses import StreamingResponse

from indexes.errors import InputError
from service.pipeline import QAResult
from service.routes.common import check_question_length, settings_of
from service.schemas import AnswerRequest, AnswerResponse

router = APIRouter()


def sse(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


@router.post(
    "/v1/answer",
    response_model=AnswerResponse,
    responses={200: {"content": {"text/event-stream": {}}}, 429: {}, 413: {}},
)
async def answer(body: AnswerRequest, request: Request):
    """One cited sentence. With `stream: true`, server-sent events: `token` events carry text
    deltas, then one `answer` event carries the whole response with its citations."""
    check_question_length(request, body.question)
    state = request.app.state
    timeout = settings_of(request).request_timeout_s
    options = {"k": body.k, "modality": body.modality, "max_sources": body.max_sources}
    if body.stream:
        state.answer_queue.check()
        parts = state.pipeline.stream(body.question, timeout_s=timeout, **options)
        return StreamingResponse(
            events(parts, request),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
    async with state.answer_queue.slot():
        try:
            selection, timings = await run_in_threadpool(
                state.pipeline.select, body.question, **options
            )
        except InputError as exc:
            raise HTTPException(422, str(exc)) from None
        writing = run_in_threadpool(
            lambda: list(
                state.pipeline.write(body.question, selection, timings, timeout_s=timeout)
            )[-1]
        )
        try:
            # The pipeline stops at the deadline between tokens; this bounds a generator that
            # hangs before its first token.
            result = await asyncio.wait_for(writing, timeout + 1.0)
        except TimeoutError:
            result = QAResult.unanswered(
                selection, timings, f"generation timed out after {timeout:g} s"
            )
    return respond(result, request)


def respond(result: QAResult, request: Request) -> AnswerResponse:
    metrics = request.app.state.metrics
    metrics.observe_stages(result.answer.timings)
    if result.answer.generation_error:
        metrics.generation_errors.inc()
    return AnswerResponse.from_result(result)


async def events(parts: Iterator[str | QAResult], request: Request) -> AsyncIterator[str]:
    """The blocking pipeline runs in the thread pool; each part goes out as it is made.

    The slot is taken here, inside the stream, so a client gone before the stream starts
    cannot leak it; a stream that lost the race for the last slot gets an `error` event.
    """
    try:
        async with request.app.state.answer_queue.slot():
            async for part in iterate_in_threadpool(parts):
                if isinstance(part, QAResult):
                    yield sse("answer", respond(part, request).model_dump())
                else:
                    yield sse("token", {"text": part})
    except InputError as exc:
        yield sse("error", {"detail": str(exc)})
    except HTTPException as exc:
        yield sse("error", {"detail": exc.detail})
