"""A path no route serves answers 404 before FastAPI's router walks every route for it.

FastAPI (0.137 and later) matches each route through per-route context objects; an unknown
path is tried against all of them, then again with its trailing slash toggled, then by the
request metrics. A scanner's paths then cost several times more CPU than a lookup.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from fastapi.routing import iter_route_contexts
from starlette._utils import get_route_path  # what Starlette's router matches on
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from isp_gateway.envelope import error_response
from isp_gateway.observability import ROUTE_TEMPLATE, UNMATCHED

# A route regex's named groups: dropped when the regexes are joined into one.
_NAMED_GROUP = re.compile(r"\(\?P<[^>]+>")


def known_paths(routes: Sequence[BaseRoute]) -> re.Pattern[str]:
    """One regex matching every path some route serves, whatever the method."""
    patterns = [
        _NAMED_GROUP.sub("(?:", context.path_regex.pattern.removeprefix("^").removesuffix("$"))
        for context in iter_route_contexts(routes)
        if getattr(context, "path_regex", None) is not None
    ]
    return re.compile("(?:" + "|".join(patterns) + ")")


class UnknownPathMiddleware:
    """404 for a path that no route serves, with or without its trailing slash (a path
    served the other way gets the router's redirect), without the router's walk: with
    FastAPI's per-route matching, a scanner's unknown paths cost several times more CPU
    than a lookup. The answer is the one the 404 handler gives; it runs inside the
    request-id, access-log, metrics and CORS layers like any other."""

    def __init__(self, app: ASGIApp, *, routes: Callable[[], Sequence[BaseRoute]]) -> None:
        self.app = app
        self.routes = routes
        self._known: re.Pattern[str] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if self._known is None:  # built on first use: every route is added by then
                self._known = known_paths(self.routes())
            # The path as the router matches it (without a root path the server was given).
            path = get_route_path(scope)
            other = path[:-1] if path.endswith("/") else path + "/"
            if not self._known.fullmatch(path) and (
                path == "/" or not self._known.fullmatch(other)
            ):
                scope[ROUTE_TEMPLATE] = UNMATCHED
                await error_response(404, "error", "Not found")(scope, receive, send)
                return
        await self.app(scope, receive, send)
