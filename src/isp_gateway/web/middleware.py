"""Pure ASGI middleware: request id and access log, and the optional service rate limit."""

from __future__ import annotations

import itertools
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from isp_gateway.kit import deadline, messages
from isp_gateway.kit.actions import Action
from isp_gateway.kit.callers import Caller
from isp_gateway.kit.errors import StoreUnavailable
from isp_gateway.kit.recorder import Recorder
from isp_gateway.kit.storage import Store
from isp_gateway.web.envelope import encode, failure
from isp_gateway.web.logs import AccessLog, mask_path, mask_unknown_path, request_id_var
from isp_gateway.web.route_table import ROUTE_TEMPLATE, UNMATCHED

error_log = logging.getLogger("isp_gateway")

_SAFE_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
# The request's store budget when a layer in front of this middleware (the lookup edge)
# started it: its store calls and the stack's share one REDIS_TIMEOUT_SECONDS.
STORE_BUDGET = "isp_gateway.store_budget"


def store_budget(scope: Scope, seconds: float | None) -> deadline.StoreBudget | None:
    """The request's store budget: the one a layer in front started, else a new one of
    `seconds` (None: no budget, each store call its own timeout, as with no Redis)."""
    if seconds is None:
        return None
    budget = scope.get(STORE_BUDGET)
    if budget is None:
        budget = scope[STORE_BUDGET] = deadline.StoreBudget(seconds)
    return budget


async def send_json(
    send: Send, status: int, payload: Any, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """A JSON answer sent straight from middleware, below FastAPI's handlers; its bytes are
    the handlers' (envelope.encode)."""
    body = encode(payload)
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


async def send_error_envelope(
    send: Send,
    status: int,
    action: str,
    message: str,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    payload = failure(action, message)
    await send_json(send, status, payload, headers)


class RequestIds:
    """Request ids for one app: the caller's `X-Request-ID` when sane, else a new one.

    Shared by the request middleware and the lookup edge (clients/fastpath.py), so ids stay
    unique in the process whichever layer answers."""

    def __init__(self) -> None:
        # Unique, not secret: a per-app random prefix and a counter cost far less than a
        # uuid4 (an urandom call) on every request.
        self._prefix = uuid.uuid4().hex[:12] + "-"
        self._counter = itertools.count(1)

    def pick(self, incoming: bytes | None) -> str:
        if incoming is not None:
            text = incoming.decode("latin-1")
            if _SAFE_ID.fullmatch(text):
                return text
        return f"{self._prefix}{next(self._counter):x}"


@dataclass(frozen=True, slots=True)
class RequestLayer:
    """What the layer a request meets first gives every answer, whichever layer that is
    (the request middleware, or the edge in front of it, web/edge.py): an id, an access
    line (`access_log=None`: ACCESS_LOG=false), the request's store budget
    (REDIS_TIMEOUT_SECONDS with Redis: all the store calls of a request share it) and the
    language every layer below answers in (MESSAGES_LANGUAGE, kit/messages)."""

    ids: RequestIds
    access_log: AccessLog | None = None
    store_seconds: float | None = None
    language: messages.Language = messages.Language.ES


class RequestContextMiddleware:
    """Gives every request an id (kept from `X-Request-ID` when sane), echoes it, logs one
    access line, and starts the request's deadline: every answer comes within
    UPSTREAM_TIMEOUT_SECONDS + 2 s (CALLERS.md 2; kit/deadline.py), and all its store calls
    share REDIS_TIMEOUT_SECONDS (CALLERS.md 6). The one place a deadline
    starts: what runs below (routes, MCP tools, shared loads) reads it.
    Query strings are not logged: they can hold documents and phones."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        layer: RequestLayer,
        deadline_seconds: float | None = None,
        rate_limits: Callable[[], deadline.RateLimitView | None] = lambda: None,
    ) -> None:
        self.app = app
        self.layer = layer
        # The margin of the 2 s is for the answer itself: shared loads are waited for only
        # until the upstream's timeout. `rate_limits` is the upstream gateway, whose
        # Retry-After a waiting request reads.
        self.deadline_seconds = deadline_seconds
        self.rate_limits = rate_limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan" and self.layer.access_log is not None:
                await self.app(scope, receive, self._flush_at_shutdown(send))
            else:
                await self.app(scope, receive, send)
            return
        incoming = None
        for name, value in scope["headers"]:
            if name == b"x-request-id":
                incoming = value
                break
        layer = self.layer
        request_id = layer.ids.pick(incoming)
        scope.setdefault("state", {})["request_id"] = request_id
        request_id_var.set(request_id)
        messages.use_language(layer.language)
        if self.deadline_seconds is not None:
            budget = store_budget(scope, layer.store_seconds)
            deadline.start(self.deadline_seconds, self.rate_limits(), budget)
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
            access = layer.access_log
            if access is not None and access.enabled():
                path = scope["path"]
                access.add(
                    scope["method"],
                    # A path no route knows (notfound.py marks it) may hold anything.
                    mask_unknown_path(path)
                    if scope.get(ROUTE_TEMPLATE) == UNMATCHED
                    else mask_path(path),
                    status_holder["status"],
                    (time.perf_counter() - started) * 1000,
                    request_id,
                )

    def _flush_at_shutdown(self, send: Send) -> Send:
        """The lines still waiting are written before the server is told shutdown is done."""
        access = self.layer.access_log
        assert access is not None

        async def send_wrapper(message: Message) -> None:
            if message["type"].startswith("lifespan.shutdown."):
                access.flush()
            await send(message)

        return send_wrapper


E = TypeVar("E", bound=Exception)


async def answer_errors(
    app: ASGIApp,
    scope: Scope,
    receive: Receive,
    send: Send,
    errors: type[E],
    answer: Callable[[E], Awaitable[None]],
) -> None:
    """Run `app`; when it raises one of `errors` before its answer has started, `answer`
    gives one instead. Once the answer has started it is too late for another: the error
    goes on, and the server closes the connection."""
    started = False

    async def tracking_send(message: Message) -> None:
        nonlocal started
        if message["type"] == "http.response.start":
            started = True
        await send(message)

    try:
        await app(scope, receive, tracking_send)
    except errors as exc:
        if started:
            raise
        await answer(exc)


class ErrorAnswering(Generic[E]):
    """A layer that answers the `errors` its app raises before answering (`answer_errors`),
    with `answer`; other traffic passes through."""

    errors: type[E]

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def answer(exc: E) -> None:
            await self.answer(exc, scope, receive, send)

        await answer_errors(self.app, scope, receive, send, self.errors, answer)

    async def answer(self, exc: E, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


class UnhandledErrorMiddleware(ErrorAnswering[Exception]):
    """Turns an unhandled exception into the generic 500 envelope inside our middleware
    stack, so the answer still carries the request id and CORS headers (Starlette's own
    last-resort handler sits outside them), and the traceback is logged once, here."""

    errors = Exception

    async def answer(self, exc: Exception, scope: Scope, receive: Receive, send: Send) -> None:
        request_id = scope.get("state", {}).get("request_id", "-")
        error_log.error(
            "unhandled error on %s %s id=%s",
            scope["method"],
            mask_path(scope["path"]),
            request_id,
            exc_info=exc,
        )
        message = messages.say(Action.ERROR, "internal")
        await send_error_envelope(send, 500, Action.ERROR, message)


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
    """The service's own limits on /api/v1, per client address and per token subject, each
    off unless its setting is above 0 (DECISIONS.md: one bot usually holds the one token).

    Counted per fixed minute in the store, so workers share them with Redis. The subject is
    read from a valid Bearer token only; a missing or bad token is left to the auth check."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        store: Callable[[], Store],
        subject_of: Callable[[str], str | None],
        per_address: int,
        per_subject: int,
        audit: Callable[[], Recorder] | None = None,
    ) -> None:
        self.app = app
        self.store = store
        # Each refusal is counted in the audit (CALLERS.md 6), in memory: no store call.
        self.audit = audit
        # The subject of a valid Bearer token in an Authorization header, else None
        # (auth/credentials.py's jwt_subject: no 401 here, the auth check answers that).
        self.subject_of = subject_of
        self.per_address = per_address
        self.per_subject = per_subject

    def _count(self, subject: str | None, address: str) -> None:
        if self.audit is None:
            return
        if subject is None:  # no valid token read here: the address is all that is known
            self.audit().count(Action.RATE_LIMITED, "refused", anonymous_from=address)
            return
        name = f"jwt:{subject}"
        caller = Caller(name, name, address)
        self.audit().count(Action.RATE_LIMITED, "refused", caller=caller)

    def _subject(self, scope: Scope) -> str | None:
        for name, value in scope["headers"]:
            if name == b"authorization":
                return self.subject_of(value.decode("latin-1"))
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or (self.per_address <= 0 and self.per_subject <= 0)
            # /mcp (CALLERS.md 5) is the same API for AI agents, under the same limits.
            or not (scope["path"].startswith("/api/v1/") or scope["path"] == "/mcp")
        ):
            await self.app(scope, receive, send)
            return
        now = time.time()
        window = int(now // 60)
        keys: list[tuple[str, int]] = []
        client = scope.get("client")
        address = str(client[0]) if client else "unknown"
        subject = None
        if self.per_address > 0:
            keys.append((f"ratelimit:addr:{address}", self.per_address))
        if self.per_subject > 0:
            subject = self._subject(scope)
            if subject is not None:
                keys.append((f"ratelimit:sub:{subject}", self.per_subject))
        for key, limit in keys:
            if await self.store().incr(f"{key}:{window}", 1, ttl=65) > limit:
                self._count(subject, address)
                retry_after = [(b"retry-after", str(max(1, int((window + 1) * 60 - now))).encode())]
                if scope["path"].startswith("/api/v1/auth/"):
                    # The token endpoint answers OAuth2-style, outside the envelope.
                    await send_json(send, 429, {"detail": "Too many requests."}, retry_after)
                else:
                    message = messages.say(Action.RATE_LIMITED, "service")
                    await send_error_envelope(send, 429, Action.RATE_LIMITED, message, retry_after)
                return
        await self.app(scope, receive, send)


class StoreUnavailableMiddleware(ErrorAnswering[StoreUnavailable]):
    """The clear answer for a store failure raised outside FastAPI's handlers (the rate
    limiter, the lookup fast path): 503 `store_unavailable`, in the token endpoint's
    `{"detail": ...}` shape there, instead of a traceback. Inside the routes the service
    error handler renders it."""

    errors = StoreUnavailable

    async def answer(
        self, exc: StoreUnavailable, scope: Scope, receive: Receive, send: Send
    ) -> None:
        if scope["path"].startswith("/api/v1/auth/"):
            body: dict[str, Any] = {"detail": exc.message}
        else:
            body = failure(exc.action, exc.message)
        response = JSONResponse(body, status_code=exc.status_code, headers=exc.headers)
        await response(scope, receive, send)
