"""POST /v1/answer: one cited sentence, as JSON or as server-sent events."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

from fastapi import APIRouter, HTTPException, Request
from fastapi.concurrency import iterate_in_threadpool, run_in_threadpool
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from mmrag.core.pipeline import QAResult, QARun
from mmrag.indexes.errors import InputError
from mmrag.service.routes.common import ERRORS, check_answer_request, settings_of
from mmrag.service.schemas import AnswerRequest, AnswerResponse

router = APIRouter()


def sse(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


class ReleasingStream(StreamingResponse):
    """A stream whose resources are released however it ends: read to the end, the client
    gone mid-stream, or never started (gone before the first byte).

    Starlette leaves an abandoned body iterator suspended rather than closing it, so cleanup
    inside the iterator's own `finally` would wait for the garbage collector.
    """

    def __init__(self, content: AsyncIterator[str], release: Callable[[], None]) -> None:
        super().__init__(
            content,
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.release()


@router.post(
    "/v1/answer",
    response_model=AnswerResponse,
    responses={200: {"content": {"text/event-stream": {}}}, **ERRORS},
)
async def answer(body: AnswerRequest, request: Request):
    """One cited sentence. With `stream: true`, server-sent events: `token` events carry text
    deltas, then one `answer` event carries the whole response with its citations."""
    check_answer_request(request, body)
    state = request.app.state
    options = {
        "k": body.k,
        "modality": body.modality,
        "max_sources": body.max_sources,
        "timeout_s": settings_of(request).request_timeout_s,
    }
    # Admitted before anything is sent: a full queue is a 429, also for streams.
    ticket = await state.answer_queue.acquire()
    if body.stream:
        run = state.pipeline.run(body.question, **options)

        def release() -> None:
            run.close()  # the engine stops at its next token and is free for the next question
            ticket.release()

        return ReleasingStream(events(run, request), release)
    try:
        result = await run_in_threadpool(state.pipeline.answer, body.question, **options)
    except InputError as exc:
        raise HTTPException(422, str(exc)) from None
    finally:
        ticket.release()
    return respond(result, request)


def respond(result: QAResult, request: Request) -> AnswerResponse:
    metrics = request.app.state.metrics
    metrics.observe_stages(result.timings.as_dict())
    if result.answer.generation_error:
        metrics.generation_errors.inc()
    return AnswerResponse.from_result(result)


async def events(run: QARun, request: Request) -> AsyncIterator[str]:
    """Tokens as the run writes them, then the whole answer; a late failure is an `error`."""
    try:
        async for token in iterate_in_threadpool(iter(run)):
            yield sse("token", {"text": token})
    except InputError as exc:
        yield sse("error", {"detail": str(exc)})
        return
    assert run.result is not None
    yield sse("answer", respond(run.result, request).model_dump())
