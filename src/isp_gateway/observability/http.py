"""The HTTP side of the metrics: every answer counted by route template, method and status
(the middleware), and `GET /metrics` (the registry itself is metrics.py)."""

from __future__ import annotations

from time import perf_counter

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from isp_gateway.observability.metrics import RATE_LIMIT, THROTTLE_KINDS, Metrics
from isp_gateway.web.route_table import ROUTE_TEMPLATE, UNMATCHED, RouteTable, method_label


class MetricsMiddleware:
    """Counts every answer by route template, method and status, and its duration; also
    throttle refusals (429s).

    Outermost, so it sees the rate limiter's and the lookup fast path's answers too. The
    template comes from the route FastAPI matched, or the one the fast path names; an answer
    given before routing is matched against the app's route table (a 404 is `unmatched`)."""

    def __init__(self, app: ASGIApp, *, metrics: Metrics, routes: RouteTable) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    def _match(self, scope: Scope) -> str:
        partial = None
        for route in self.routes.routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return route.path or UNMATCHED
            if match is Match.PARTIAL and partial is None:
                partial = route.path or UNMATCHED
        return partial or UNMATCHED

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            seconds = perf_counter() - started
            route = scope.get("route")
            if route is not None:
                template = getattr(route, "path", UNMATCHED)
            else:
                template = scope.get(ROUTE_TEMPLATE) or self._match(scope)
            self.metrics.observe_request(template, method_label(scope["method"]), status, seconds)
            if status == 429:
                self.metrics.throttle(
                    THROTTLE_KINDS.get(template, "other") if route is not None else RATE_LIMIT
                )


# -- GET /metrics ----------------------------------------------------------------------

router = APIRouter(tags=["system"])


@router.get("/metrics", response_class=Response, include_in_schema=False)
async def get_metrics(request: Request) -> Response:
    """Prometheus metrics of this replica (all its workers); no token."""
    metrics: Metrics = request.app.state.metrics
    return Response(await metrics.render(), media_type=CONTENT_TYPE_LATEST)
