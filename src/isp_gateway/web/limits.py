"""Request body limit (MAX_BODY_BYTES): 413 `payload_too_large` in the envelope.

A pure ASGI middleware, so nothing downstream ever holds more than the limit: a declared
`Content-Length` above it is refused before a byte of the body is read, and a chunked upload
(no length) is counted as its chunks arrive and refused as soon as it passes the limit.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.web.middleware import answer_errors, send_error_envelope

ACTION = Action.PAYLOAD_TOO_LARGE


class PayloadTooLarge(HTTPException):
    """Raised from `receive` when a streamed body passes the limit. An HTTPException, so
    FastAPI's body reading lets it through unchanged (it turns other errors into a 400) and
    the envelope handler renders it; the middleware renders it if it gets here instead."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, message(limit), headers={"Connection": "close"})


def message(limit: int) -> str:
    return messages.say(ACTION, "limit", limit=limit)


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.limit = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1  # the server rejects a malformed length before us
                if declared > self.limit:
                    await self._refuse(send)
                    return
                break
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise PayloadTooLarge(self.limit)
            return message

        async def refuse(_: PayloadTooLarge) -> None:
            await self._refuse(send)

        await answer_errors(self.app, scope, counting_receive, send, PayloadTooLarge, refuse)

    async def _refuse(self, send: Send) -> None:
        # The rest of the body is never read: the connection is closed after the answer.
        await send_error_envelope(
            send, 413, ACTION, message(self.limit), [(b"connection", b"close")]
        )
