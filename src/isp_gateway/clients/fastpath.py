"""The lookup fast path for the three client lookups, the bots' hottest calls.

FastAPI's routing, dependency resolution and middleware stack cost several times more than
a lookup in the warm index. This path answers only the sure case: a GET on a lookup route,
with no `Origin`, a Bearer token this process has already fully verified (and that has not
expired), and a hit in the fresh index. Everything else falls through, untouched, to the
regular routes, which document the endpoints and apply every rule (validation, misses, the
upstream, staleness, errors).

It takes one of two places:
- `LookupEdge`, the default: in front of the whole app (`GatewayApp.__call__`), outside
  Starlette's and FastAPI's own layers and ours, doing inline the little they would do for
  such an answer: the request id, its access line and its metrics.
- `LookupFastPath`, a middleware behind the service rate limiter, when a rate limit is on:
  every request must be counted first, and the limiter's answer is the regular one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Receive, Scope, Send

from isp_gateway.errors import StoreUnavailable
from isp_gateway.observability import ROUTE_TEMPLATE
from isp_gateway.runtime import Runtime

if TYPE_CHECKING:
    from isp_gateway.logs import AccessLog
    from isp_gateway.middleware import RequestIds
    from isp_gateway.observability.metrics import Metrics

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


def _lookup(scope: Scope) -> tuple[str, str, str | None, bytes | None] | None:
    """(kind, value, bearer token, X-Request-ID) of a fast-path candidate, else None."""
    if scope["type"] != "http" or scope["method"] != "GET":
        return None
    path: str = scope["path"]
    if not path.startswith(PREFIX):
        return None
    kind, sep, value = path[len(PREFIX) :].partition("/")
    if not sep or kind not in KINDS or not value or "/" in value:
        return None
    token = None
    request_id = None
    seen_authorization = False
    for name, header in scope["headers"]:
        if name == b"authorization":
            # The first header only, as the regular route reads it: a later one must not
            # let a request through that the route would refuse.
            if not seen_authorization:
                seen_authorization = True
                scheme, _, credentials = header.decode("latin-1").partition(" ")
                if scheme.lower() == "bearer":
                    token = credentials.strip()
        elif name == b"origin":
            return None  # a browser call: let CORS and the regular route answer it
        elif name == b"x-request-id" and request_id is None:
            request_id = header
    return kind, value, token, request_id


async def _hit(runtime: Runtime, kind: str, value: str, token: str | None) -> bytes | None:
    # Only a token already verified in full by the regular dependency, not expired.
    if not token or runtime.token_cache.get(token) is None:
        return None
    return await runtime.clients.fresh_hit_body(kind, value)


class LookupEdge:
    """Answers sure lookup hits in front of the whole app; `serve` says whether it did.

    A store failure (Redis away while the cache's stamp is read) is not answered here: the
    request falls through and the regular stack gives its 503 `store_unavailable`."""

    def __init__(
        self,
        *,
        runtime_getter: Callable[[], Runtime],
        ids: RequestIds,
        access_log: AccessLog | None,
        metrics: Metrics | None,
    ) -> None:
        self.runtime_getter = runtime_getter
        self.ids = ids
        self.access_log = access_log
        self.metrics = metrics

    async def serve(self, scope: Scope, send: Send) -> bool:
        candidate = _lookup(scope)
        if candidate is None:
            return False
        started = time.perf_counter()
        kind, value, token, incoming_id = candidate
        try:
            body = await _hit(self.runtime_getter(), kind, value, token)
        except StoreUnavailable:
            return False
        if body is None:
            return False
        request_id = self.ids.pick(incoming_id)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    _CONTENT_TYPE,
                    (b"content-length", str(len(body)).encode()),
                    (b"x-request-id", request_id.encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
        seconds = time.perf_counter() - started
        access = self.access_log
        if access is not None and access.enabled():
            access.add("GET", MASKED.get(kind) or scope["path"], 200, seconds * 1000, request_id)
        if self.metrics is not None:
            self.metrics.observe_request(TEMPLATES[kind], "GET", 200, seconds)
        return True


class LookupFastPath:
    """The same answers as a middleware, for when the service rate limiter must count
    every request first. The request id, access line and metrics are the outer layers'."""

    def __init__(self, app: ASGIApp, *, runtime_getter: Callable[[], Runtime]) -> None:
        self.app = app
        self.runtime_getter = runtime_getter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        candidate = _lookup(scope)
        if candidate is not None:
            kind, value, token, _ = candidate
            body = await _hit(self.runtime_getter(), kind, value, token)
            if body is not None:
                scope[ROUTE_TEMPLATE] = TEMPLATES[kind]
                await send(
                    {
                        "type": "http.response.start",
                        "status": 200,
                        "headers": [_CONTENT_TYPE, (b"content-length", str(len(body)).encode())],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
