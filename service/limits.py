"""Back-pressure: a bounded admission queue (429 + Retry-After) and a request-body size cap (413).

Answers cost a generator call each; past a few in flight, more concurrency only lengthens every
request's wait, so the service admits `concurrency` at once, lets `queue` more wait, and tells
the rest when to come back rather than letting latency grow without bound.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mmrag.service.openai_chat import error_content


class AdmissionQueue:
    def __init__(self, name: str, concurrency: int, queue: int, retry_after_s: int = 1) -> None:
        self.name = name
        self.capacity = concurrency + queue
        self.retry_after_s = retry_after_s
        self._slots = asyncio.Semaphore(concurrency)
        self.admitted = 0  # running or waiting

    async def acquire(self) -> Ticket:
        """Wait for a slot, or raise the 429 at once if `capacity` requests are already in.

        A stream takes its ticket before its 200 is sent, so a full queue is refused with a
        status code, not with an error event inside a stream that began as a success.
        """
        if self.admitted >= self.capacity:
            raise HTTPException(
                429,
                f"{self.name} is at capacity ({self.capacity} requests running or queued); "
                f"retry in {self.retry_after_s} s",
                headers={"Retry-After": str(self.retry_after_s)},
            )
        self.admitted += 1
        try:
            await self._slots.acquire()
        except BaseException:
            self.admitted -= 1
            raise
        return Ticket(self)

    def _leave(self) -> None:
        self.admitted -= 1
        self._slots.release()

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        ticket = await self.acquire()
        try:
            yield
        finally:
            ticket.release()


class Ticket:
    """An admitted request's slot; `release` is idempotent, so every exit path may call it."""

    def __init__(self, queue: AdmissionQueue) -> None:
        self._queue: AdmissionQueue | None = queue

    def release(self) -> None:
        if self._queue is not None:
            self._queue._leave()
            self._queue = None


class BodySizeLimit:
    """413 for bodies over `max_bytes`: by Content-Length, or as chunked uploads arrive; in
    OpenAI's error shape on its routes."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._reject(send, scope["path"])
            return
        received = 0
        too_large = False

        async def counting_receive() -> Message:
            nonlocal received, too_large
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.max_bytes:
                # Whatever the app makes of a cut-off body, the client is told 413 instead.
                too_large = True
                return {"type": "http.request", "body": b"", "more_body": False}
            return message

        rejected = False

        async def replacing_send(message: Message) -> None:
            nonlocal rejected
            if not too_large:
                await send(message)
            elif not rejected:
                rejected = True
                await self._reject(send, scope["path"])

        await self.app(scope, counting_receive, replacing_send)

    async def _reject(self, send: Send, path: str) -> None:
        why = f"request body larger than {self.max_bytes} bytes"
        body = json.dumps(error_content(path, 413, why)).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
