"""The edge: the layer that answers, before routing, what is sure without it.

FastAPI's routing, dependency resolution and exception handling cost several times more
server time than a lookup in the warm index; a refusal that went through them cost 1.3 to
6x a cached lookup (CALLERS.md 6 "The cost of refusing": a refusal is never dearer than the
cheapest answer, or a flood of them is the cheapest way to load the service). So the edge
answers, for a request without `Origin` (a browser's goes the regular way, through CORS):

- a path no route serves: the 404 of the regular stack (notfound.py's);
- a JSON body that does not parse, on a route that reads one: the 422 `validation_error`
  FastAPI's parse and our handler give (it comes before any credential is read);
- what the doors answer: the lookup hits (clients/fastpath.py), and a refused credential
  or scope on a route whose first dependency is the caller (auth/edge.py), each byte for byte
  the regular route's answer, counted in the audit as the regular route counts it.

Everything else goes on, untouched (a body the edge read is handed on as it came).

Placed by configuration (app.py): in front of the whole stack, the default, it does inline
the little the outer layers would do for its answers (the request id, the access line, the
request metrics); behind the service rate limiter, when a rate limit is on (every request is
counted first), it names the route template it answered for their metrics.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from isp_gateway.kit import deadline, messages
from isp_gateway.kit.actions import Action
from isp_gateway.kit.answers import failure
from isp_gateway.web.doors import Door, EdgeAnswer, EdgeRequest, EdgeRoute, RouteIndex, read_request
from isp_gateway.web.envelope import MALFORMED_JSON, encode, invalid_request
from isp_gateway.web.logs import mask_path, mask_unknown_path
from isp_gateway.web.middleware import store_budget
from isp_gateway.web.notfound import KNOWN_PATH, known_paths
from isp_gateway.web.route_table import (
    ROUTE_TEMPLATE,
    UNMATCHED,
    RouteTable,
    method_label,
)

if TYPE_CHECKING:
    from isp_gateway.web.middleware import RequestLayer

_CONTENT_TYPE = (b"content-type", b"application/json")
# The content types FastAPI parses as JSON (none given, application/json, application/*+json).
_JSON_TYPE = re.compile(r"application/(?:[!#$&^_.+\w-]+\+)?json\s*(?:;.*)?", re.IGNORECASE)


log = logging.getLogger("isp_gateway")

# How many refusal bodies an edge keeps made (one a place a malformed body stops).
_KEPT_BODIES = 4096


class RequestMetrics(Protocol):
    """What the edge counts of its answers (observability/metrics.py's Metrics)."""

    def observe_request(self, template: str, method: str, status: int, seconds: float) -> None: ...


class Edge:
    """Answers at the edge what is sure (see the module) and passes every other request on
    to `app`, untouched. `layer` and `metrics` are given when the edge sits in front of the
    layers that would otherwise do them. `first` are asked before the route is
    looked up (the lookup hits), `doors` with it."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        routes: RouteTable,
        first: Sequence[Door] = (),
        doors: Sequence[Door] = (),
        max_body_bytes: int,
        language: messages.Language = messages.Language.ES,
        layer: RequestLayer | None = None,
        metrics: RequestMetrics | None = None,
    ) -> None:
        self.app = app
        self.first = tuple(first)
        self.doors = tuple(doors)
        self.max_body_bytes = max_body_bytes
        self.language = language
        # In front of the request middleware: what it would give an answer, given here (with
        # Redis, the request's store budget starts here and the stack behind takes it over).
        self.layer = layer
        self._ids = layer.ids if layer is not None else None
        self.metrics = metrics
        # Built once the route table is filled (the app builds its stack as it starts).
        self._known = known_paths(routes)
        self._routes = RouteIndex(routes)
        # The bodies of the edge's own refusals, made once each (the language is the app's).
        self._bodies: dict[str, bytes] = {}
        self._malformed_answers: dict[tuple[EdgeRoute, str], EdgeAnswer] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        passed = await self._answer(scope, receive, send)
        if passed is not None:
            await self.app(scope, passed, send)

    async def serve(self, scope: Scope, send: Send, receive: Receive | None = None) -> bool:
        """Answer the request if the answer is sure; whether it did (else nothing was sent).
        Without `receive`, the request has no body."""
        return await self._answer(scope, receive or _no_body, send) is None

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> Receive | None:
        """None when the edge answered; else the `receive` the request goes on with."""
        request = read_request(scope, self._ids, self.language)
        if request is None:
            return receive
        started = time.perf_counter()
        layer = self.layer
        if layer is not None and layer.store_seconds is not None:
            seconds = layer.store_seconds
            deadline.start(seconds, None, store_budget(scope, seconds))
        answer = None
        for door in self.first:
            try:
                answer = await door.answer(request, None)
            except Exception as exc:  # a door's fault: the regular stack serves the request
                _door_failed(door, request, exc)
                continue
            if answer is not None:
                break
        else:
            route = self._routes.find(request.method, request.path)
            if route is None:
                if self._known.fullmatch(request.path):
                    return receive  # another method's path: the router's 405
                answer = self._not_found()
            else:
                scope[KNOWN_PATH] = True  # the 404 layer behind need not look again
                if route.json_body:
                    stated = self._json_checked(request)
                    if stated is None:
                        return receive  # a body FastAPI parses first, unseen here
                    if stated:
                        receive, answer = await self._json_body(route, receive, stated)
                if answer is None:
                    for door in self.doors:
                        try:
                            answer = await door.answer(request, route)
                        except Exception as exc:
                            _door_failed(door, request, exc)
                            continue
                        if answer is not None:
                            break
        if answer is None:
            return receive
        await self._send(send, request, answer, started)
        return None

    def _not_found(self) -> EdgeAnswer:
        body = self._bodies.get("")
        if body is None:
            messages.use_language(self.language)
            not_found = messages.say(Action.ERROR, "not_found")
            body = self._bodies[""] = encode(failure(Action.ERROR, not_found))
        return EdgeAnswer(404, body, UNMATCHED)

    def _malformed(self, field: str, route: EdgeRoute) -> EdgeAnswer:
        """The 422 of a body that is not JSON, its field the place the parse stopped; made
        once a route and field (bounded: a body's length, so its field, is the caller's).
        A route of a fixed path has its access-log path made with it."""
        made = self._malformed_answers.get((route, field))
        if made is not None:
            return made
        body = self._bodies.get(field)
        if body is None:
            messages.use_language(self.language)
            errors = [{"field": field, "message": MALFORMED_JSON}]
            message = invalid_request(errors)
            body = encode(failure(Action.VALIDATION_ERROR, message, meta={"errors": errors}))
            if len(self._bodies) < _KEPT_BODIES:
                self._bodies[field] = body
        made = EdgeAnswer(422, body, route.template)
        if "{" not in route.template:
            made.logged = mask_path(route.template)
        if len(self._malformed_answers) < _KEPT_BODIES:
            self._malformed_answers[(route, field)] = made
        return made

    def _json_checked(self, request: EdgeRequest) -> int | None:
        """How much of the body the edge reads as FastAPI will, before anything else: its
        stated length for a body it parses as JSON of a length the body limit lets through;
        0 for none it parses (no body, another content type); None for one the edge leaves
        to the regular stack (no stated length, or past the limit, whose 413 comes first)."""
        kind = request.content_type
        if kind and kind != "application/json" and _JSON_TYPE.fullmatch(kind) is None:
            return 0  # (the usual type needs no regex)
        length = request.content_length
        if length is None or length < 0 or length > self.max_body_bytes:
            return None
        return length

    async def _json_body(
        self, route: EdgeRoute, receive: Receive, stated: int
    ) -> tuple[Receive, EdgeAnswer | None]:
        """The 422 of a body that is not JSON, else a `receive` that hands the body on."""
        message = await receive()
        # The body is whole once the stated length is here, even while the server still says
        # more_body (granian sends an empty last message after every body): a malformed one
        # is answered without waiting for that end, which the app reads for a well-formed one.
        body = message.get("body", b"")
        more = message.get("more_body", False)
        if message["type"] != "http.request" or (more and len(body) < stated):
            chunks: list[bytes] = []
            size = 0
            while True:
                if message["type"] != "http.request":  # the client left: let the app see it
                    taken = _as_messages(chunks, more=True) if chunks else []
                    return _replay([*taken, message], receive), None
                chunk = message.get("body", b"")
                chunks.append(chunk)
                size += len(chunk)
                more = message.get("more_body", False)
                if not more or size >= stated:
                    break
                message = await receive()
            body = b"".join(chunks)
        if len(body) > self.max_body_bytes:  # more than it said: the body limit answers it
            return _replay(_as_messages([body], more=more), receive), None
        try:
            _parse(body)
        except json.JSONDecodeError as exc:
            field = f"body.{exc.pos}"
        except (ValueError, RecursionError):
            # Not UTF-8, or nested past the parser's depth: FastAPI's 400 (it takes any
            # failure of the parse so), which our handler answers 422.
            field = "body"
        else:
            return _replay(_as_messages([body], more=more), receive), None
        return receive, self._malformed(field, route)

    async def _send(
        self, send: Send, request: EdgeRequest, answer: EdgeAnswer, started: float
    ) -> None:
        scope = request.scope
        length = (b"content-length", str(len(answer.body)).encode())
        if answer.type_first:
            headers = [_CONTENT_TYPE, length, *answer.headers]
        else:
            headers = [*answer.headers, length, _CONTENT_TYPE]
        layer = self.layer
        request_id = request.id
        if layer is not None:
            if request_id is None:
                # Not in the context: the answer is made (request.name() is for the doors).
                request_id = request.id = layer.ids.pick(request.request_id)
            headers.append((b"x-request-id", request_id.encode()))
        else:
            scope[ROUTE_TEMPLATE] = answer.template  # for the outer layers' metrics and log
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": answer.body})
        seconds = time.perf_counter() - started
        if layer is not None and request_id is not None:
            access = layer.access_log
            if access is not None and access.enabled():
                logged = answer.logged
                if logged is None:
                    path = scope["path"]
                    unmatched = answer.template == UNMATCHED
                    logged = mask_unknown_path(path) if unmatched else mask_path(path)
                access.add(request.method, logged, answer.status, seconds * 1000, request_id)
        if self.metrics is not None:
            method = request.method
            self.metrics.observe_request(
                answer.template, method_label(method), answer.status, seconds
            )


# json.loads's own decoder, and the first bytes after which json.loads reads a body as
# something other than UTF-8 (a byte-order mark, or a zero byte of UTF-16 or UTF-32).
_DECODER = json.JSONDecoder()
_NOT_UTF8_FIRST = frozenset({b"\x00", b"\xef", b"\xfe", b"\xff"})


def _parse(body: bytes) -> None:
    """json.loads(body), as FastAPI parses it, raising what it raises; a plain UTF-8 body
    (every real one) is decoded without json.loads's look for another encoding."""
    if body[:1] in _NOT_UTF8_FIRST or body[1:2] == b"\x00":
        json.loads(body)
    else:
        _DECODER.decode(body.decode("utf-8", "surrogatepass"))


def _door_failed(door: Door, request: EdgeRequest, exc: Exception) -> None:
    """A door that raised is a door that declined, logged: nothing was sent yet, and the
    regular stack applies every rule again (its own failure is its 500 envelope, with the
    request id), where the server's bare 500 would have answered."""
    log.error(
        "edge: the %s failed on %s %s; the regular stack answers",
        type(door).__name__,
        request.method,
        mask_path(request.path),
        exc_info=exc,
    )


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}


def _as_messages(chunks: list[bytes], *, more: bool = False) -> list[Message]:
    body = b"".join(chunks)
    return [{"type": "http.request", "body": body, "more_body": more}]


def _replay(messages_: list[Message], receive: Receive) -> Receive:
    """`receive` with the messages the edge already took handed back first."""
    pending = list(messages_)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
