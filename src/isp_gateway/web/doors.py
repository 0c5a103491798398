"""What the edge (edge.py) and its doors share: the request as the edge reads it, an answer
given there, the route a request reaches, and the `Door` a feature adds to the edge
(clients/fastpath.py's lookups, auth/edge.py's credentials)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from fastapi import params
from fastapi.routing import RouteContext
from starlette.types import Scope

from isp_gateway.kit import messages
from isp_gateway.kit.answers import Answer
from isp_gateway.kit.errors import ServiceError
from isp_gateway.web.envelope import encode
from isp_gateway.web.logs import request_id_var
from isp_gateway.web.notfound import bare_pattern
from isp_gateway.web.route_table import UNMATCHED, RouteTable, route_path

if TYPE_CHECKING:
    from isp_gateway.web.middleware import RequestIds


def speak(request: EdgeRequest) -> None:
    """Before a door makes an answer's text anew (a made one is kept): the app's language."""
    messages.use_language(request.language)


class EdgeRequest:
    """What the edge and its doors read of a request, from one pass over its headers."""

    __slots__ = (
        "api_key",
        "authorization",
        "content_length",
        "content_type",
        "credential",
        "end_user",
        "id",
        "ids",
        "language",
        "method",
        "path",
        "request_id",
        "scope",
    )

    def __init__(
        self,
        scope: Scope,
        path: str,
        ids: RequestIds | None = None,
        language: messages.Language = messages.Language.ES,
    ) -> None:
        self.scope = scope
        self.method: str = scope["method"]
        self.path = path
        self.authorization: str | None = None
        self.api_key: str | None = None
        self.end_user: str | None = None
        self.request_id: bytes | None = None  # the caller's X-Request-ID
        self.id: str | None = None  # the request's id, once the edge has given it one
        # Who gives it one: the edge in front of the request layer (else that layer did).
        self.ids = ids
        # What an answer made anew says (the app's MESSAGES_LANGUAGE): `speak` sets it.
        self.language = language
        self.content_type: str | None = None
        self.content_length: int | None = None
        # A door's verdict on the credential, kept for the next door (auth/edge.py).
        self.credential: object = None

    def name(self) -> str | None:
        """The request's id, given now if the edge gives it and has not yet: before a door
        counts a refusal in the audit (its event carries it), else as the answer is sent (a
        hit needs it no sooner)."""
        if self.id is None and self.ids is not None:
            self.id = self.ids.pick(self.request_id)
            request_id_var.set(self.id)
        return self.id

    @property
    def address(self) -> str:
        """The client's address (read when a door needs it: a refusal's audit, a caller)."""
        client = self.scope.get("client")
        return str(client[0]) if client else "unknown"


def read_request(
    scope: Scope,
    ids: RequestIds | None = None,
    language: messages.Language = messages.Language.ES,
) -> EdgeRequest | None:
    """The request as the edge reads it, or None when it carries an `Origin` (CORS answers
    a browser's request, whatever it is). The first of each header counts, as the regular
    routes read them."""
    request = EdgeRequest(scope, route_path(scope), ids, language)
    for name, value in scope["headers"]:
        if name == b"authorization":
            if request.authorization is None:
                request.authorization = value.decode("latin-1")
        elif name == b"x-api-key":
            if request.api_key is None:
                request.api_key = value.decode("latin-1").strip()
        elif name == b"origin":
            return None
        elif name == b"x-request-id":
            if request.request_id is None:
                request.request_id = value
        elif name == b"x-end-user-id":
            if request.end_user is None:
                request.end_user = value.decode("latin-1")
        elif name == b"content-type":
            if request.content_type is None:
                request.content_type = value.decode("latin-1")
        elif name == b"content-length" and request.content_length is None:
            length = value.decode("latin-1")
            request.content_length = int(length) if length.isdigit() else -1
    return request


@dataclass(slots=True)
class EdgeAnswer:
    """An answer given at the edge: its status, body and headers (before the content
    length and type, as Starlette's responses order them), and the route template its
    metrics are counted under. Not frozen: one is made for every hit, and a frozen
    dataclass's construction costs several times more."""

    status: int
    body: bytes
    template: str
    headers: tuple[tuple[bytes, bytes], ...] = ()
    # A hit's headers put the content type first (the lookups' prebuilt answers).
    type_first: bool = field(default=False, kw_only=True)
    # The path as the access log writes it, when the door knows it (else masked here).
    logged: str | None = field(default=None, kw_only=True)

    @classmethod
    def of_error(cls, exc: ServiceError, template: str) -> EdgeAnswer:
        """A service error's envelope, as the regular handler renders it."""
        answer = Answer.of_error(exc)
        headers = tuple(
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in answer.headers.items()
        )
        return cls(answer.status_code, encode(answer.body), template, headers)


@dataclass(frozen=True, slots=True, eq=False)
class EdgeRoute:
    """A route as the edge knows it: FastAPI's, its template, whether it reads JSON."""

    context: RouteContext
    template: str
    json_body: bool


class Door(Protocol):
    """A part of the edge that answers some requests itself: the answer, or None to let
    the request go on. `route` is the route the request's method and path reach (None for
    the doors asked before the route is looked up)."""

    async def answer(self, request: EdgeRequest, route: EdgeRoute | None) -> EdgeAnswer | None: ...


def _reads_json(context: RouteContext) -> bool:
    """Whether FastAPI parses the route's body as JSON before its dependencies."""
    body_field = getattr(context, "body_field", None)
    return body_field is not None and not isinstance(body_field.field_info, params.Form)


class RouteIndex:
    """The routes by method: one regex for each method, whose matching alternative names
    the first route the router would try, as Starlette's walk finds it."""

    def __init__(self, routes: RouteTable) -> None:
        patterns: dict[str, list[str]] = {}
        self.routes: list[EdgeRoute] = []
        every: set[str] = set()
        for context in routes.routes:
            regex = getattr(context, "path_regex", None)
            if regex is None:
                continue
            every.update(context.methods or ())
        for context in routes.routes:
            regex = getattr(context, "path_regex", None)
            if regex is None:
                continue
            bare = bare_pattern(regex)
            group = f"(?P<r{len(self.routes)}>{bare})"
            self.routes.append(EdgeRoute(context, context.path or UNMATCHED, _reads_json(context)))
            # A route without methods (a mount, the MCP endpoint) takes every method.
            for method in context.methods or every:
                patterns.setdefault(method, []).append(group)
        self.by_method = {
            method: re.compile("|".join(groups)) for method, groups in patterns.items()
        }
        # What `find` answers for each path a route names without a parameter (the
        # writes: resolve, tickets, promises...), worked out here once: a dict read then.
        self.fixed: dict[tuple[str, str], EdgeRoute] = {}
        for route in self.routes:
            if "{" not in route.template:
                for method in route.context.methods or every:
                    found = self._search(method, route.template)
                    if found is not None:
                        self.fixed[(method, route.template)] = found

    def find(self, method: str, path: str) -> EdgeRoute | None:
        found = self.fixed.get((method, path))
        return found if found is not None else self._search(method, path)

    def _search(self, method: str, path: str) -> EdgeRoute | None:
        pattern = self.by_method.get(method)
        match = pattern.fullmatch(path) if pattern is not None else None
        if match is None or match.lastgroup is None:
            return None
        return self.routes[int(match.lastgroup[1:])]
