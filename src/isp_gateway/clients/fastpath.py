"""A pure ASGI fast path for the three client lookups, the bots' hottest calls.

FastAPI's routing and dependency resolution cost several times more than a lookup in the
warm index. This layer answers only the sure case: a GET on a lookup route, a Bearer token
this process has already fully verified (and that has not expired), and a hit in the fresh
index. Everything else falls through, untouched, to the regular routes, which document the
endpoints and apply every rule (validation, misses, the upstream, staleness, errors).
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from isp_gateway.observability import ROUTE_TEMPLATE
from isp_gateway.runtime import Runtime

PREFIX = "/api/v1/clients/"
KINDS = frozenset({"by-document", "by-phone", "by-service-id"})
# The regular routes' templates, named in the scope for the request metrics.
TEMPLATES = {
    "by-document": PREFIX + "by-document/{document}",
    "by-phone": PREFIX + "by-phone/{phone}",
    "by-service-id": PREFIX + "by-service-id/{service_id}",
}
_HEADERS = [(b"content-type", b"application/json")]


class LookupFastPath:
    def __init__(self, app: ASGIApp, *, runtime_getter: Callable[[], Runtime]) -> None:
        self.app = app
        self.runtime_getter = runtime_getter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            path: str = scope["path"]
            if path.startswith(PREFIX):
                body = await self._answer(scope, path[len(PREFIX) :])
                if body is not None:
                    scope[ROUTE_TEMPLATE] = TEMPLATES[path[len(PREFIX) :].partition("/")[0]]
                    await send(
                        {
                            "type": "http.response.start",
                            "status": 200,
                            "headers": [*_HEADERS, (b"content-length", str(len(body)).encode())],
                        }
                    )
                    await send({"type": "http.response.body", "body": body})
                    return
        await self.app(scope, receive, send)

    async def _answer(self, scope: Scope, rest: str) -> bytes | None:
        kind, sep, value = rest.partition("/")
        if not sep or kind not in KINDS or not value or "/" in value:
            return None
        token = None
        seen_authorization = False
        for name, header in scope["headers"]:
            if name == b"authorization":
                # The first header only, as the regular route reads it: a later one must
                # not let a request through that the route would refuse.
                if not seen_authorization:
                    seen_authorization = True
                    scheme, _, credentials = header.decode("latin-1").partition(" ")
                    if scheme.lower() == "bearer":
                        token = credentials.strip()
            elif name == b"origin":
                return None  # a browser call: let CORS and the regular route answer it
        if not token:
            return None
        runtime = self.runtime_getter()
        # Only a token already verified in full by the regular dependency, not expired.
        if runtime.token_cache.get(token) is None:
            return None
        return await runtime.clients.fresh_hit_body(kind, value)
