"""Response headers that keep the chat page from being framed, sniffed or made to run
anything but its own files."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# What the page uses: its own script, style sheet and API; images from this service, the
# photo a user picks (blob:) and the empty favicon (data:). No inline code, no frames.
PAGE_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' blob: data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
PAGE_HEADERS = {"Content-Security-Policy": PAGE_POLICY, "X-Frame-Options": "DENY"}


class NoSniff:
    """`X-Content-Type-Options: nosniff` on every response: a JSON error or an image is never
    run as a script or a page, whatever a browser would guess from its bytes."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                nosniff = (b"x-content-type-options", b"nosniff")
                message["headers"] = [*message.get("headers", []), nosniff]
            await send(message)

        await self.app(scope, receive, sending)
