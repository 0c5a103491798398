"""The lookup fast path for the three client lookups, the bots' hottest calls.

FastAPI's routing, dependency resolution and middleware stack cost several times more than
a lookup in the warm index. This path answers only the sure case: a GET on a lookup route,
with no `Origin`, a Bearer token this process has already fully verified (and that has not
expired) or a current API key holding `clients:read` (within its own rate), and a hit in the
fresh index. Everything else falls through, untouched, to the
regular routes, which document the endpoints and apply every rule (validation, misses, the
upstream, staleness, errors).

One wrapper, `LookupEdge`, placed by configuration (app.py):
- in front of the whole app, the default: outside Starlette's and FastAPI's own layers and
  ours, given the request ids, the access log and the metrics, it does inline the little
  they would do for such an answer: the request id, its access line and its metrics;
- behind the service rate limiter, when a rate limit is on (every request must be counted
  first, and the limiter's answer is the regular one): given none of them, as the outer
  layers do those; it names the route template it served for their metrics.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from starlette.types import ASGIApp, Receive, Scope, Send

from isp_gateway.auth.credentials import (
    CREDENTIALS_ERROR,
    Gatekeeper,
    bearer,
    refused_credential,
    valid_end_user,
)
from isp_gateway.auth.keys import CLIENTS_READ, KEY_PREFIX, enforce_key_rate
from isp_gateway.auth.tokens import InvalidToken, verify_token
from isp_gateway.kit import deadline
from isp_gateway.kit.errors import Locked, StoreUnavailable
from isp_gateway.web.middleware import store_budget
from isp_gateway.web.route_table import ROUTE_TEMPLATE

if TYPE_CHECKING:
    from isp_gateway.clients.service import ClientService
    from isp_gateway.observability.metrics import Metrics
    from isp_gateway.web.logs import AccessLog
    from isp_gateway.web.middleware import RequestIds

PREFIX = "/api/v1/clients/"
KINDS = frozenset({"by-document", "by-phone", "by-service-id"})
# The regular routes' templates, named in the scope for the request metrics.
TEMPLATES = {
    "by-document": PREFIX + "by-document/{document}",
    "by-phone": PREFIX + "by-phone/{phone}",
    "by-service-id": PREFIX + "by-service-id/{service_id}",
}
# The access log's path for a lookup, masked without a regex: documents and phones never
# reach a log; a service id is not personal and stays (as logs.mask_path leaves it).
MASKED = {
    "by-document": PREFIX + "by-document/***",
    "by-phone": PREFIX + "by-phone/***",
}
_CONTENT_TYPE = (b"content-type", b"application/json")
# The regular route's 401, byte for byte (FastAPI's HTTPException answer): a refused
# credential is answered here, for less server time than a hit (CALLERS.md 6 "The cost of
# refusing"), instead of after FastAPI's routing, dependencies and exception handling.
_REFUSED_BODY = b'{"detail":"' + CREDENTIALS_ERROR.encode() + b'"}'
_REFUSED_HEADERS = [
    _CONTENT_TYPE,
    (b"content-length", str(len(_REFUSED_BODY)).encode()),
    (b"www-authenticate", b"Bearer"),
]


def _lookup(scope: Scope) -> tuple[str, str, str | None, str | None, bytes | None] | None:
    """(kind, value, bearer token, API key, X-Request-ID) of a fast-path candidate, else
    None. The key is read as keys.presented_key reads it: X-API-Key wins, then a Bearer
    `igw_...`; a request presenting a key is never served on a JWT."""
    if scope["type"] != "http" or scope["method"] != "GET":
        return None
    path: str = scope["path"]
    if not path.startswith(PREFIX):
        return None
    kind, sep, value = path[len(PREFIX) :].partition("/")
    if not sep or kind not in KINDS or not value or "/" in value:
        return None
    token = None
    api_key = None
    request_id = None
    seen_authorization = False
    seen_api_key = False
    for name, header in scope["headers"]:
        if name == b"authorization":
            # The first header only, as the regular route reads it: a later one must not
            # let a request through that the route would refuse.
            if not seen_authorization:
                seen_authorization = True
                token = bearer(header.decode("latin-1"))
        elif name == b"x-api-key":
            if not seen_api_key:
                seen_api_key = True
                api_key = header.decode("latin-1").strip()
        elif name == b"origin":
            return None  # a browser call: let CORS and the regular route answer it
        elif name == b"x-request-id" and request_id is None:
            request_id = header
        elif name == b"x-end-user-id" and not valid_end_user(header.decode("latin-1")):
            return None  # the regular route answers it 422 validation_error
    if api_key is None and token is not None and token.startswith(KEY_PREFIX):
        api_key, token = token, None
    return kind, value, token, api_key, request_id


class _WithClients(Protocol):
    @property
    def clients(self) -> ClientService: ...


class EdgeRuntime(Gatekeeper, Protocol):
    """What the edge reads of the running service (services.Runtime is one): the
    credentials' parts and the client lookups."""

    @property
    def services(self) -> _WithClients: ...


async def _hit(
    runtime: EdgeRuntime,
    kind: str,
    value: str,
    token: str | None,
    api_key: str | None,
    address: str,
) -> bytes | None:
    """The hit's body, None to fall through, or Unauthenticated (a refused credential)."""
    if api_key is not None:
        # A current key (the ring's cache: one dict access once the key has been seen)
        # with the scope; without it, the regular route answers 403.
        found = runtime.key_ring.lookup(api_key)
        if found is None:
            refused_credential(runtime, address)
            raise _Refused()
        if not found.allows(CLIENTS_READ):
            return None
        body = await runtime.services.clients.fresh_hit_body(kind, value)
        if body is not None and found.rate_per_minute is not None:
            try:
                await enforce_key_rate(runtime.store, found)
            except Locked:
                return None  # the regular route counts it again and answers 429
        return body
    if not token:
        refused_credential(runtime, address)
        raise _Refused()
    if runtime.token_cache.get(token) is None:
        # Verified in full here (the regular dependency's check, and its cache).
        try:
            verify_token(runtime.settings, token, runtime.token_cache)
        except InvalidToken:
            refused_credential(runtime, address)
            raise _Refused() from None
    return await runtime.services.clients.fresh_hit_body(kind, value)


class _Refused(Exception):
    """No valid credential: the edge answers the regular route's 401."""


class LookupEdge:
    """Answers sure lookup hits and passes every other request on to `app`, untouched.

    `ids`, `access_log` and `metrics` are given when the edge sits in front of the layers
    that would otherwise do them (the request id, the access line, the request metrics).
    While the store is away, a hit in this process's fresh index is still answered (the
    cache serves its local copy: lookups keep answering through a Redis failover); a store
    failure here (an API key's rate) is not: the request falls through and the regular
    stack gives its 503 `store_unavailable`."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        runtime_getter: Callable[[], EdgeRuntime],
        ids: RequestIds | None = None,
        access_log: AccessLog | None = None,
        metrics: Metrics | None = None,
        store_seconds: float | None = None,
    ) -> None:
        self.app = app
        self.runtime_getter = runtime_getter
        self.ids = ids
        self.access_log = access_log
        self.metrics = metrics
        # In front of the request middleware, with Redis: the request's store budget starts
        # here, and the stack behind takes it over when the request falls through.
        self.store_seconds = store_seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not await self.serve(scope, send):
            await self.app(scope, receive, send)

    async def serve(self, scope: Scope, send: Send) -> bool:
        """Answer the request if it is a sure hit; whether it did (else nothing was sent)."""
        candidate = _lookup(scope)
        if candidate is None:
            return False
        started = time.perf_counter()
        kind, value, token, api_key, incoming_id = candidate
        if self.store_seconds is not None:
            deadline.start(self.store_seconds, None, store_budget(scope, self.store_seconds))
        status = 200
        try:
            client = scope.get("client")
            address = str(client[0]) if client else "unknown"
            body = await _hit(self.runtime_getter(), kind, value, token, api_key, address)
        except StoreUnavailable:
            return False
        except _Refused:
            status, body = 401, _REFUSED_BODY
        if body is None:
            return False
        if status == 200:
            headers = [_CONTENT_TYPE, (b"content-length", str(len(body)).encode())]
        else:
            headers = list(_REFUSED_HEADERS)
        request_id = None
        if self.ids is not None:
            request_id = self.ids.pick(incoming_id)
            headers.append((b"x-request-id", request_id.encode()))
        else:
            scope[ROUTE_TEMPLATE] = TEMPLATES[kind]  # for the outer layers' metrics
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        seconds = time.perf_counter() - started
        access = self.access_log
        if access is not None and request_id is not None and access.enabled():
            access.add("GET", MASKED.get(kind) or scope["path"], status, seconds * 1000, request_id)
        if self.metrics is not None:
            self.metrics.observe_request(TEMPLATES[kind], "GET", status, seconds)
        return True
