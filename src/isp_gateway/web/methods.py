"""Wrong methods answer 405 with an `Allow` header that lists every method of the path.

Starlette answers 405 only when no route matches the path with the method, and its `Allow`
names the methods of the first route it found. Two gaps follow, both closed here:
- a fixed path that a parameterised route also matches (`PUT /clients/resolve` against
  `PUT /clients/{service_id}`) was routed to the parameter and answered 422 for `resolve`;
  `guard_fixed_paths` puts a 405 route for those methods in front of the parameter;
- a path served by several routes advertised only some of its methods; `allowed_methods`
  collects them all.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from starlette.exceptions import HTTPException
from starlette.routing import Match, Route
from starlette.types import Scope

from isp_gateway.web.route_table import RouteTable


class MethodGuard(Route):
    """A route that only answers 405 (not a method of the path; left out of `Allow`)."""


async def _method_not_allowed(request: Request) -> None:
    raise HTTPException(405)


def _routes(routes: RouteTable) -> list[Any]:
    """Every path route as the router matches it (full path, included routers unfolded)."""
    return [
        context
        for context in routes.routes
        if isinstance(context.original_route, Route)
        and not isinstance(context.original_route, MethodGuard)
    ]


def _is_fixed(route: Any) -> bool:
    return not route.param_convertors


def allowed_methods(routes: RouteTable, scope: Scope) -> list[str]:
    """The methods of every route matching the request's path. A fixed path shadows the
    parameterised ones it also matches, as the guards make it do for routing."""
    matching = [r for r in _routes(routes) if r.matches(scope)[0] != Match.NONE]
    fixed = [r for r in matching if _is_fixed(r)]
    methods: set[str] = set()
    for route in fixed or matching:
        methods |= route.methods or set()
    return sorted(methods)


def guard_fixed_paths(app: FastAPI, table: RouteTable) -> None:
    """Call once all routes are added and in the table: for each fixed path that a
    parameterised route of another method also matches, a 405 route for those methods,
    tried first (by the router and in the table)."""
    routes = _routes(table)
    fixed_methods: dict[str, set[str]] = {}
    for route in routes:
        if _is_fixed(route):
            fixed_methods.setdefault(route.path, set()).update(route.methods or ())
    guarded: dict[str, set[str]] = {}
    for route in routes:
        if _is_fixed(route):
            continue
        for path, served in fixed_methods.items():
            if route.path_regex.match(path):
                guarded.setdefault(path, set()).update((route.methods or set()) - served)
    for path, methods in guarded.items():
        if methods:
            guard = MethodGuard(
                path, _method_not_allowed, methods=sorted(methods), include_in_schema=False
            )
            app.router.routes.insert(0, guard)
            table.put_first(guard)
