"""uvicorn's HTTP/1.1 protocol with the limits it lacks on what a client sends before the app.

httptools, uvicorn's fast parser, accepts a request head of any size (it joins a header's value
piece by piece: a 200 MB header was read for 43 s while a neighbour's question waited 30 s),
and neither parser times out a head or a body that arrives a byte at a time. Here the head
(request line and headers) must fit in `max_head_bytes` and `max_headers` (else 431) and arrive
within `head_timeout_s` of the connection or of the previous response; a body must arrive
within `body_timeout_s` of its head (else 408). Bytes the parser refuses (`Content-Length:
-1`, Content-Length with Transfer-Encoding, a TLS handshake sent to plain HTTP) get a 400. The
app never sees such a request; each refusal is in the API's error shape and counted in
/metrics (`mmrag_refused_requests`).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from functools import partial
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from mmrag.core.settings import Settings
from mmrag.service.metrics import REFUSED
from mmrag.service.openai_chat import error_content

# How long a refused client may go on sending what is then discarded.
LINGER_S = 2.0


@dataclass(frozen=True)
class ClientLimits:
    max_head_bytes: int
    max_headers: int
    head_timeout_s: float
    body_timeout_s: float

    @classmethod
    def of(cls, settings: Settings) -> ClientLimits:
        return cls(
            settings.max_head_bytes,
            settings.max_headers,
            settings.head_timeout_s,
            settings.body_timeout_s,
        )


class TooManyHeaders(Exception):
    """Raised in a parser callback: httptools turns it into the parse error uvicorn handles."""


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """One connection; uvicorn builds one per client through `protocol_for(limits)`."""

    def __init__(self, *args: Any, limits: ClientLimits, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = limits
        self._in_body = False  # between a head's end and its message's end
        self._head_bytes = 0
        self._header_count = 0
        self._timer: asyncio.TimerHandle | None = None
        self._refused = False
        self._too_many_headers = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.limits.head_timeout_s, "request head")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Feed the parser no more head than the limit allows: past it, 431 at once."""
        if self._refused:
            return  # the rest of a refused request, read only so that the client reads our reply
        while data and not self._refused and not self.transport.is_closing():
            if self._in_body:
                super().data_received(data)
                return
            room = self.limits.max_head_bytes - self._head_bytes
            piece, data = data[:room], data[room:]
            self._head_bytes += len(piece)
            super().data_received(piece)
            if not self._in_body and self._head_bytes >= self.limits.max_head_bytes:
                self._refuse(431, f"request head larger than {self.limits.max_head_bytes} bytes")

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._header_count = 0

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.limits.max_headers:
            self._too_many_headers = True
            raise TooManyHeaders  # stops the parser; uvicorn then calls `send_400_response`
        super().on_header(name, value)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to what its parser refuses, in plain text: here in JSON."""
        if self._too_many_headers:
            self._refuse(431, f"more than {self.limits.max_headers} request headers")
        else:
            self._refuse(400, "invalid HTTP request: the request line or headers do not parse")

    def on_headers_complete(self) -> None:
        self._in_body = True
        self._head_bytes = 0
        super().on_headers_complete()
        if self.pipeline:  # queued behind a request in progress, with reading paused
            self._disarm()
        else:
            self._arm(self.limits.body_timeout_s, "request body")

    def on_message_complete(self) -> None:
        self._in_body = False
        self._disarm()  # the app's own deadline covers the answer from here
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.cycle.response_complete:
            self._arm(self.limits.head_timeout_s, "request head")  # none pipelined behind it

    def _arm(self, seconds: float, what: str) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, self._time_out, seconds, what)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _time_out(self, seconds: float, what: str) -> None:
        """A route still waiting on the body learns that its client left (`connection_lost`)."""
        self._timer = None
        started = self.cycle is not None and self.cycle.response_started
        if (self._in_body or self._head_bytes) and not started:
            self._refuse(408, f"{what} not received within {seconds:g} s")
        else:  # an idle connection, or a response already begun: nothing to add
            self.transport.close()

    def _refuse(self, status: int, why: str) -> None:
        """The API's error shape, then a lingering close, as nginx does: closing a socket with
        unread data makes the kernel reset it, and a client still sending its 64 MB header
        would lose the reply. So the write side is shut and whatever else comes is discarded,
        for at most `LINGER_S`."""
        self.logger.warning("refused a request: %s", why)
        REFUSED.add(status)
        path = getattr(self, "url", b"").split(b"?", 1)[0].decode("latin-1")
        body = json.dumps(error_content(path, status, why)).encode()
        head = [
            STATUS_LINE[status],
            *(name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers),
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(body)).encode() + b"\r\n",
            b"connection: close\r\n\r\n",
        ]
        self._refused = True
        self.transport.write(b"".join(head) + body)
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self._disarm()
            self._timer = self.loop.call_later(LINGER_S, self.transport.close)
        else:
            self._disarm()
            self.transport.close()


def protocol_for(limits: ClientLimits) -> Any:
    """What uvicorn's `http=` takes: it builds the protocol with (config, server_state, ...).
    A partial of a module-level class, so multi-worker servers can pickle it."""
    return partial(BoundedHttpToolsProtocol, limits=limits)
