"""Pure ASGI middleware: request id and access log, and the optional service rate limit."""

from __future__ import annotations

import itertools
import json
import logging
import re
import time
import uuid
from collections.abc import Sequence
from typing import Any

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from isp_gateway.envelope import envelope
from isp_gateway.store import Store

access_log = logging.getLogger("isp_gateway.access")
error_log = logging.getLogger("isp_gateway")

_SAFE_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
# Documents and phones travel in lookup paths; the access log shows them masked.
_PERSONAL_PATH = re.compile(r"/(by-document|by-phone)/[^/]+")


async def send_error_envelope(
    send: Send,
    status: int,
    action: str,
    message: str,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """An error envelope sent straight from middleware, below FastAPI's handlers."""
    body = json.dumps(envelope(ok=False, type="error", action=action, message=message)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class RequestContextMiddleware:
    """Gives every request an id (kept from `X-Request-ID` when sane), echoes it, and logs
    one access line. Query strings are not logged: they can hold documents and phones."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        # Request ids need to be unique, not secret: a per-app random prefix and a counter
        # cost far less than a uuid4 (an urandom call) on every request.
        self._id_prefix = uuid.uuid4().hex[:12] + "-"
        self._ids = itertools.count(1)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = ""
        for name, value in scope["headers"]:
            if name == b"x-request-id":
                incoming = value.decode("latin-1")
                request_id = incoming if _SAFE_ID.match(incoming) else ""
                break
        if not request_id:
            request_id = f"{self._id_prefix}{next(self._ids):x}"
        scope.setdefault("state", {})["request_id"] = request_id
        started = time.perf_counter()
        status_holder: dict[str, int] = {"status": 500}

        async def send_wrapper(message: Message) -> None:
            if message["type"] == "http.response.start":
                status_holder["status"] = message["status"]
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                message["headers"] = headers
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            if access_log.isEnabledFor(logging.INFO):
                access_log.info(
                    "%s %s %d %.1fms id=%s",
                    scope["method"],
                    _PERSONAL_PATH.sub(r"/\1/***", scope["path"]),
                    status_holder["status"],
                    (time.perf_counter() - started) * 1000,
                    request_id,
                )


class UnhandledErrorMiddleware:
    """Turns an unhandled exception into the generic 500 envelope inside our middleware
    stack, so the answer still carries the request id and CORS headers (Starlette's own
    last-resort handler sits outside them), and the traceback is logged once, here."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_wrapper(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        except Exception:
            if started:
                raise  # too late for an envelope; the server closes the connection
            request_id = scope.get("state", {}).get("request_id", "-")
            error_log.exception(
                "unhandled error on %s %s id=%s",
                scope["method"],
                _PERSONAL_PATH.sub(r"/\1/***", scope["path"]),
                request_id,
            )
            await send_error_envelope(send, 500, "error", "Internal server error")


class CORSWhenOrigin:
    """Starlette's CORS middleware, engaged only for requests that carry an `Origin`
    header. Bots send none, and the wrapper costs them a send wrapper per request."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        allow_origins: Sequence[str],
        allow_methods: Sequence[str],
        allow_headers: Sequence[str],
        expose_headers: Sequence[str],
        allow_credentials: bool = False,
    ) -> None:
        self.app = app
        self.cors = CORSMiddleware(
            app,
            allow_origins=allow_origins,
            allow_methods=allow_methods,
            allow_headers=allow_headers,
            expose_headers=expose_headers,
            allow_credentials=allow_credentials,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for name, _ in scope["headers"]:
                if name == b"origin":
                    await self.cors(scope, receive, send)
                    return
        await self.app(scope, receive, send)


class RateLimitMiddleware:
    """Per-client-address limit on /api/v1 (off unless RATE_LIMIT_PER_MINUTE > 0).

    Counted per fixed minute in the store so workers share it with Redis."""

    def __init__(self, app: ASGIApp, *, store_getter: Any, per_minute: int) -> None:
        self.app = app
        self.store_getter = store_getter
        self.per_minute = per_minute

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or self.per_minute <= 0
            or not scope["path"].startswith("/api/v1/")
        ):
            await self.app(scope, receive, send)
            return
        store: Store = self.store_getter()
        client = scope.get("client")
        address = client[0] if client else "unknown"
        now = time.time()
        window = int(now // 60)
        count = await store.incr(f"ratelimit:{address}:{window}", 1, ttl=65)
        if count > self.per_minute:
            retry_after = str(max(1, int((window + 1) * 60 - now)))
            await send_error_envelope(
                send,
                429,
                "rate_limited",
                "Too many requests, slow down",
                [(b"retry-after", retry_after.encode())],
            )
            return
        await self.app(scope, receive, send)
