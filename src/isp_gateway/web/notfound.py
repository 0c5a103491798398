"""A path no route serves answers 404 before FastAPI's router walks every route for it.

FastAPI (0.137 and later) matches each route through per-route context objects; an unknown
path is tried against all of them, then again with its trailing slash toggled, then by the
request metrics. A scanner's paths then cost several times more CPU than a lookup.
"""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Receive, Scope, Send

from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.web.envelope import error_response
from isp_gateway.web.route_table import ROUTE_TEMPLATE, UNMATCHED, RouteTable, route_path

# Set by the edge (edge.py) on a path it found known: the look is not made twice.
KNOWN_PATH = "isp_gateway.known_path"
# A route regex's named groups: dropped when the regexes are joined into one.
_NAMED_GROUP = re.compile(r"\(\?P<[^>]+>")


def bare_pattern(regex: re.Pattern[str]) -> str:
    """A route's path regex as a part of a larger one: unanchored, its groups unnamed."""
    return _NAMED_GROUP.sub("(?:", regex.pattern.removeprefix("^").removesuffix("$"))


def known_paths(routes: RouteTable) -> re.Pattern[str]:
    """One regex matching every path some route serves, whatever the method."""
    patterns = [
        bare_pattern(context.path_regex)
        for context in routes.routes
        if getattr(context, "path_regex", None) is not None
    ]
    return re.compile("(?:" + "|".join(patterns) + ")")


class UnknownPathMiddleware:
    """404 for a path that no route serves, without the router's walk. A path served only
    with the other trailing slash is such a path too: the router would answer it with a
    redirect whose `Location` is built from the `Host` header (issue 17); routes that
    want both spellings declare both. Without the walk: with
    FastAPI's per-route matching, a scanner's unknown paths cost several times more CPU
    than a lookup. The answer is the one the 404 handler gives; it runs inside the
    request-id, access-log, metrics and CORS layers like any other. The edge (edge.py) gives
    the same answer before them for a request without `Origin`; this one answers the rest."""

    def __init__(self, app: ASGIApp, *, routes: RouteTable) -> None:
        self.app = app
        # Built with the middleware stack, once the route table is filled.
        self._known = known_paths(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope.get(KNOWN_PATH):
            # The path as the router matches it (without a root path the server was given).
            path = route_path(scope)
            if not self._known.fullmatch(path):
                scope[ROUTE_TEMPLATE] = UNMATCHED
                not_found = messages.say(Action.ERROR, "not_found")
                await error_response(404, Action.ERROR, not_found)(scope, receive, send)
                return
        await self.app(scope, receive, send)
