"""Pure ASGI middleware: request id and access log, and the optional service rate limit."""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from isp_gateway.store import Store

access_log = logging.getLogger("isp_gateway.access")

_SAFE_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


class RequestContextMiddleware:
    """Gives every request an id (kept from `X-Request-ID` when sane), echoes it, and logs
    one access line. Query strings are not logged: they can hold documents and phones."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        request_id = incoming if _SAFE_ID.match(incoming) else uuid.uuid4().hex
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
            access_log.info(
                "%s %s %d %.1fms id=%s",
                scope["method"],
                scope["path"],
                status_holder["status"],
                (time.perf_counter() - started) * 1000,
                request_id,
            )


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
            body = json.dumps(
                {
                    "ok": False,
                    "type": "error",
                    "action": "rate_limited",
                    "data": None,
                    "message": "Too many requests, slow down",
                    "meta": None,
                }
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 429,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"retry-after", retry_after.encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)
