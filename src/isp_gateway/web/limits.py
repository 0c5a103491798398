"""Request body limit (MAX_BODY_BYTES): 413 `payload_too_large` in the envelope.

A pure ASGI middleware, so nothing downstream ever holds more than the limit: a declared
`Content-Length` above it is refused before a byte of the body is read, and a chunked upload
(no length) is counted as its chunks arrive and refused as soon as it passes the limit.

A route whose body is meant to be larger (a payment report's receipt) is given a wider limit
here by its path (`wider`); the route enforces its own finer caps within it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

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
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        wider: Sequence[tuple[re.Pattern[str], int]] = (),
    ) -> None:
        self.app = app
        self.limit = max_body_bytes
        # (path pattern, limit) of the routes allowed a larger body than MAX_BODY_BYTES.
        self.wider = tuple(wider)

    def _limit_of(self, scope: Scope) -> int:
        if self.wider and scope["method"] == "POST":
            path = scope["path"]
            for pattern, limit in self.wider:
                if pattern.fullmatch(path):
                    return limit
        return self.limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self._limit_of(scope)
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1  # the server rejects a malformed length before us
                if declared > limit:
                    await self._refuse(send, limit)
                    return
                break
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise PayloadTooLarge(limit)
            return message

        async def refuse(_: PayloadTooLarge) -> None:
            await self._refuse(send, limit)

        await answer_errors(self.app, scope, counting_receive, send, PayloadTooLarge, refuse)

    async def _refuse(self, send: Send, limit: int) -> None:
        # The rest of the body is never read: the connection is closed after the answer.
        await send_error_envelope(send, 413, ACTION, message(limit), [(b"connection", b"close")])
