"""What the routes that answer share (/v1/answer and the OpenAI-compatible chat): admission,
one deadline from it, an uploaded photo read under that deadline while its client is there,
the run, its metrics, and streams that release their slot however they end.

Two protocols, one behaviour: a full queue is a 429 before anything is sent, a client that
leaves stops its work, and the engine is free again as soon as a stream ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from fastapi import HTTPException, Request
from fastapi.responses import StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from mmrag.core.attachments import AttachedImage, ImageAttacher
from mmrag.core.components import build_attacher
from mmrag.core.pipeline import QAResult, QARun
from mmrag.indexes.errors import InputError
from mmrag.runtime.deadline import Deadline
from mmrag.service.limits import Ticket
from mmrag.service.routes.common import settings_of, while_connected
from mmrag.service.schemas import AnswerResponse


class AnswerStream(StreamingResponse):
    """A run's server-sent events, whose resources are released however the stream ends: read
    to the end, the client gone mid-stream, or never started (gone before the first byte).

    Starlette leaves an abandoned body iterator suspended rather than closing it, so cleanup
    inside the iterator's own `finally` would wait for the garbage collector. And under uvicorn
    a write to a connection its client closed raises nothing, so an abandoned stream would be
    written to its end, its answer counted as delivered (30 dropped streams were counted as 30
    `verified` answers). So the client's leaving is watched where Starlette hears of it: the
    run stops at once, the stream counts as dropped, and an answer is recorded in the metrics
    only once all of it has been sent to a client still there.
    """

    def __init__(
        self, run: QARun, events: AsyncIterator[str], ticket: Ticket, request: Request
    ) -> None:
        self.run, self.ticket, self.request = run, ticket, request
        self.gone = self.delivered = False
        super().__init__(
            self._delivering(events),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def _delivering(self, events: AsyncIterator[str]) -> AsyncIterator[str]:
        async for piece in events:
            yield piece
        self.delivered = not self.gone  # Starlette asks for more once the last piece is sent

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def watching() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect" and not self.delivered:
                self.gone = True
                self.run.close()  # the engine stops at its next token
            return message

        try:
            await super().__call__(scope, watching, send)
        finally:
            self.run.close()
            release_when_stopped(self.run, self.ticket)
            if not self.delivered:
                self.request.app.state.metrics.dropped_streams.inc()
            elif self.run.result is not None:  # None: the run failed, and an error was sent
                record(self.run.result, self.request)


@dataclass
class Admission:
    """A request let in: its slot, and the deadline that began with it."""

    ticket: Ticket
    deadline: Deadline


async def admit(request: Request) -> Admission:
    """A slot, or the 429 at once when the queue is full; the deadline starts now."""
    ticket = await request.app.state.answer_queue.acquire()
    deadline = Deadline(settings_of(request).request_timeout_s)
    request.app.state.deadlines.add(deadline)  # cancelled when the server is stopped
    return Admission(ticket, deadline)


def attacher(request: Request) -> ImageAttacher:
    """Built on the first upload: the OCR model loads then, not at start-up."""
    state = request.app.state
    if getattr(state, "attacher", None) is None:
        state.attacher = build_attacher(settings_of(request))
    return state.attacher


async def read_photo(request: Request, admission: Admission, data: bytes) -> AttachedImage:
    """The user's photo with its text read, within the request's deadline; one that does not
    decode is a 422 (and frees the slot, as any failure here does). The reading is a sample
    of the `ocr` stage in /metrics, whether an answer follows or its client has left."""
    try:
        reading = partial(attacher(request).attach, data, stop=admission.deadline.stopped)
        photo = await while_connected(request, admission.deadline, reading)
    except InputError as exc:
        admission.ticket.release()
        raise HTTPException(422, str(exc)) from None
    except BaseException:
        admission.ticket.release()
        raise
    request.app.state.metrics.stage.labels("ocr").observe(photo.ocr_s)
    return photo


def stream(
    request: Request,
    admission: Admission,
    question: str,
    options: dict[str, Any],
    events: Callable[[QARun], AsyncIterator[str]],
) -> AnswerStream:
    """The run of `question`, streamed as its `events`."""
    run = request.app.state.pipeline.run(question, deadline=admission.deadline, **options)
    return AnswerStream(run, events(run), admission.ticket, request)


async def answer_once(
    request: Request, admission: Admission, question: str, options: dict[str, Any]
) -> QAResult:
    """The whole answer, waited for while the client is there; bad input is a 422."""
    run = request.app.state.pipeline.run(question, deadline=admission.deadline, **options)
    try:
        return await while_connected(request, admission.deadline, run.wait)
    except InputError as exc:
        raise HTTPException(422, str(exc)) from None
    finally:
        run.close()
        release_when_stopped(run, admission.ticket)


def release_when_stopped(run: QARun, ticket: Ticket) -> None:
    """Free the run's slot once its worker has stopped working, not before: a worker that
    outlives its answer (an engine that hangs) still holds the engine or a core."""
    loop = asyncio.get_running_loop()

    def release() -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: the server has stopped
            loop.call_soon_threadsafe(ticket.release)

    run.when_stopped(release)


def record(result: QAResult, request: Request) -> None:
    """An answer delivered, counted in the metrics: its stages' seconds, and how it was
    attributed (a stream's client that left got none: it is counted as a dropped stream)."""
    metrics = request.app.state.metrics
    metrics.observe_stages(result.timings.as_dict())
    if result.answer.generation_error:
        metrics.generation_errors.inc()
    else:
        metrics.answers.labels(result.answer.attribution).inc()


def respond(result: QAResult, request: Request) -> AnswerResponse:
    """The answer as the service sends it whole, recorded on the way out, whichever protocol
    carries it (a stream records its answer once sent: see AnswerStream)."""
    record(result, request)
    return AnswerResponse.from_result(result)
