"""The app's routes, walked once: the table the layers that read the routes share.

Created by `create_app` and handed to the 404 of unknown paths (notfound.py), the request
metrics' template of an answer given before routing (observability/metrics.py) and the 405
guards and `Allow` lists (methods.py), instead of each walking the router on its own. It is
filled once, when the app's middleware stack is built (app.py's `GatewayApp`, as the app
starts): every route is added by then, the MCP route, the metrics and the docs, and any a
test adds to the app before running it.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi.routing import RouteContext, iter_route_contexts
from starlette.routing import BaseRoute
from starlette.types import Scope

# The scope key an ASGI layer that answers before routing (the lookup fast path) sets to the
# route template it served, so request metrics label it like the routed request.
ROUTE_TEMPLATE = "isp_gateway.route_template"
# The route label of an answer no route served (a 404 for an unknown path).
UNMATCHED = "unmatched"
# The methods the request metrics name; any other is counted as OTHER (a bounded label).
_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})


def method_label(method: str) -> str:
    return method if method in _METHODS else "OTHER"


class RouteTable:
    """Every route in the order the router tries them, each as FastAPI's routing sees it
    (its full path; an included router's routes unfolded)."""

    def __init__(self) -> None:
        self.routes: list[RouteContext] = []

    def load(self, routes: Sequence[BaseRoute]) -> None:
        self.routes[:] = iter_route_contexts(routes)

    def put_first(self, route: BaseRoute) -> None:
        """A route the router tries before all the others (methods.py's 405 guards)."""
        self.routes[:0] = iter_route_contexts([route])


def route_path(scope: Scope) -> str:
    """The path as Starlette's router matches it: without the root path the server was
    given, when the request's path starts with it."""
    path: str = scope["path"]
    root_path: str = scope.get("root_path", "")
    if not root_path or not path.startswith(root_path):
        return path
    if path == root_path:
        return ""
    if path[len(root_path)] == "/":
        return path[len(root_path) :]
    return path
