"""create_app(settings): the only place the service is assembled. Nothing runs at import."""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from isp_gateway.accounts.router import router as accounts_router
from isp_gateway.audit.router import router as audit_router
from isp_gateway.auth.credentials import jwt_subject
from isp_gateway.auth.edge import CallerDoor, Denials
from isp_gateway.auth.router import router as auth_router
from isp_gateway.clients.fastpath import LookupDoor
from isp_gateway.clients.router import router as clients_router
from isp_gateway.diagnose.router import router as diagnose_router
from isp_gateway.kit.callers import END_USER_HEADER
from isp_gateway.kit.messages import Language, use_language
from isp_gateway.network.router import router as network_router
from isp_gateway.outages.router import router as outages_router
from isp_gateway.payments.router import REPORT_ROUTE
from isp_gateway.payments.router import router as payments_router
from isp_gateway.plans.router import router as plans_router
from isp_gateway.services import Runtime, start_runtime
from isp_gateway.settings import Settings
from isp_gateway.tickets.client_router import router as client_tickets_router
from isp_gateway.tickets.router import router as tickets_router
from isp_gateway.tickets.subjects import document_subjects
from isp_gateway.web import health
from isp_gateway.web.docs import install_docs
from isp_gateway.web.edge import Edge
from isp_gateway.web.envelope import install_error_handlers
from isp_gateway.web.limits import BodyLimitMiddleware
from isp_gateway.web.logs import AccessLog
from isp_gateway.web.methods import guard_fixed_paths
from isp_gateway.web.middleware import (
    CORSWhenOrigin,
    RateLimitMiddleware,
    RequestContextMiddleware,
    RequestIds,
    RequestLayer,
    StoreUnavailableMiddleware,
    UnhandledErrorMiddleware,
)
from isp_gateway.web.notfound import UnknownPathMiddleware
from isp_gateway.web.openapi import install_openapi
from isp_gateway.web.params import VERIFICATION_HEADER
from isp_gateway.web.route_table import RouteTable

if TYPE_CHECKING:
    from isp_gateway.observability.metrics import Metrics

log = logging.getLogger("isp_gateway")

DESCRIPTION = """
Gateway between chat bots / web front ends and a WispHub-compatible ISP backend.

Every business endpoint answers with the **BackendResponse** envelope
(`ok`, `type`, `action`, `data`, `message`, `meta`): check `action` first.
Get a token with the **Authorize** button (username and password), then try any endpoint.
"""

TAGS = [
    {"name": "system", "description": "Health and authentication."},
    {"name": "Clients", "description": "Find, verify and update customers."},
    {"name": "tickets", "description": "Support tickets with a per-zone cap."},
    {"name": "network", "description": "Remote ping diagnostics of a customer's antenna."},
    {"name": "internet-plans", "description": "The ISP's internet plans."},
]


# FastAPI's built-in OpenTelemetry looks for configured providers on every request,
# reading the environment each time; this service exports none, and the look cost about
# a tenth of a lookup's time (bench/lookups.py). Off where the FastAPI version has it.
_NO_OPENTELEMETRY: dict[str, Any] = (
    {"telemetry": {"tracing": False, "metrics": False, "logs": False}}
    if "telemetry" in inspect.signature(FastAPI.__init__).parameters
    else {}
)


def add_routes(app: FastAPI, *routers: APIRouter) -> None:
    """The routers' routes, added to the app as they are, not through `include_router`.

    Since FastAPI 0.137 an included router stays a node that routing walks on every
    request, through per-route context objects: with ten routers, a late route or an
    unknown path cost 0.4 to 0.6 ms of CPU before reaching its handler (bench/lookups.py,
    bad input). Each of our routes already carries its router's prefix, tags and
    dependencies (the token check among them), and nothing is added at inclusion, so the
    routes themselves are what `include_router` would serve."""
    for router in routers:
        app.router.routes.extend(router.routes)


class GatewayApp(FastAPI):
    """FastAPI with, optionally, one layer in front of its whole middleware stack (the
    edge, web/edge.py): a warm lookup hit and the refusals are then answered before
    Starlette's and FastAPI's own layers and ours, which would otherwise cost more than the
    lookup itself. With `edge_options` set, `edge` is that layer once the stack is built
    (on the first request)."""

    edge_options: dict[str, Any] | None = None
    edge: Edge | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Once the stack is built, an HTTP request goes straight to the edge: what FastAPI's
        # and Starlette's entries do for it is naming the app in the scope (its telemetry is
        # off, _NO_OPENTELEMETRY, and no root path is set).
        edge = self.edge
        if edge is not None and scope["type"] == "http" and not self.root_path:
            scope["app"] = self
            await edge(scope, receive, send)
            return
        await super().__call__(scope, receive, send)

    def build_middleware_stack(self) -> ASGIApp:
        # The app is about to serve: every route is added. The route table the layers
        # share is filled, once, and the 405 guards put first in it and in the router.
        routes: RouteTable = self.state.route_table
        routes.load(self.router.routes)
        guard_fixed_paths(self, routes)
        stack = super().build_middleware_stack()
        if self.edge_options is None:
            return stack
        self.edge = Edge(stack, routes=routes, **self.edge_options)
        return self.edge


def _runtime(app: FastAPI) -> Runtime:
    runtime: Runtime = app.state.runtime
    return runtime


def create_app(settings: Settings) -> FastAPI:
    metrics: Metrics | None = None
    if settings.METRICS_ENABLED:
        # Imported here, not at the top: prometheus_client must first be imported after
        # `serve` has set its multiprocess directory (observability/workers.py).
        from isp_gateway.observability.metrics import Metrics

        metrics = Metrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        async with AsyncExitStack() as stack:
            # The language of what the background tasks started here say (the outage
            # notices' sentences); a request's own is set at the edge.
            use_language(settings.MESSAGES_LANGUAGE)
            runtime = await start_runtime(stack, settings, metrics)
            if metrics is not None and settings.METRICS_PORT is not None:
                from isp_gateway.observability.exporter import serve_metrics

                exporter = await serve_metrics(
                    metrics, settings.METRICS_HOST, settings.METRICS_PORT
                )
                stack.push_async_callback(exporter.aclose)
            # In front of the server's own stop handlers, which are in place by now (and put
            # back at the end); kit/stopping.py says why the lifespan's end is too late.
            runtime.stopping.chain_signals()
            stack.callback(runtime.stopping.unchain_signals)
            app.state.runtime = runtime
            if settings.MCP_ENABLED:
                # Started by the first /mcp request; closed before the services it calls.
                stack.push_async_callback(app.state.mcp_sessions.aclose)
            # First at the end: a long poll still waiting answers before its service closes.
            stack.callback(runtime.stopping.set)
            log.info("isp-gateway started; upstream %s", settings.UPSTREAM_NET_HOST)
            yield {}

    app = GatewayApp(
        title="ISP Integration API",
        description=DESCRIPTION,
        version="1.0.0",
        openapi_tags=TAGS,
        lifespan=lifespan,
        swagger_ui_parameters={"persistAuthorization": True},
        # Served by install_docs from the installed assets, not FastAPI's CDN pages.
        docs_url=None,
        redoc_url=None,
        **_NO_OPENTELEMETRY,
    )
    install_error_handlers(app)
    add_routes(
        app,
        health.router,
        auth_router,
        clients_router,
        tickets_router,
        network_router,
        plans_router,
        accounts_router,
        client_tickets_router,
        diagnose_router,
        outages_router,
        payments_router,
        audit_router,
    )
    if settings.MCP_ENABLED:
        from isp_gateway.mcp.endpoint import install as install_mcp

        install_mcp(app)
    if metrics is not None:
        from isp_gateway.observability.http import MetricsMiddleware
        from isp_gateway.observability.http import router as metrics_router

        app.state.metrics = metrics
        if settings.METRICS_PORT is None:
            # Else on its own port only (observability/exporter.py), off the public one.
            add_routes(app, metrics_router)
    # The contract (issue 12): offline docs, 405 for every wrong method, the full OpenAPI.
    install_docs(app)
    # The one route table the layers that read the routes share (route_table.py), filled
    # when the app starts (GatewayApp.build_middleware_stack), the 405 guards with it.
    routes = RouteTable()
    app.state.route_table = routes

    # Added last = outermost. The order: metrics, request id and access log, the store's
    # 503 (Redis only), the service rate limit and the lookup edge behind it (only with a
    # rate limit on; it serves only origin-less bot calls, so it may sit outside CORS),
    # CORS, the last-resort error envelope, the body limit, the 404 of unknown paths, then
    # FastAPI's routing.
    # With no rate limit (the default) the lookup edge is in front of all of them.
    app.add_middleware(UnknownPathMiddleware, routes=routes)
    app.add_middleware(
        BodyLimitMiddleware,
        max_body_bytes=settings.MAX_BODY_BYTES,
        # A payment report's body holds a receipt: its own cap, and the form around it may
        # take what any body may (the route refuses a receipt past RECEIPT_MAX_BYTES itself).
        wider=[(REPORT_ROUTE, settings.RECEIPT_MAX_BYTES + settings.MAX_BODY_BYTES)],
    )
    app.add_middleware(UnhandledErrorMiddleware)
    app.add_middleware(
        CORSWhenOrigin,
        allow_origins=settings.CORS_ORIGINS,
        allow_credentials=True,
        allow_methods=["GET", "POST", "PUT", "OPTIONS"],
        # Every header a caller may send (CALLERS.md): a web front end with an API key names
        # its end user and presents its verification id like a bot does.
        allow_headers=[
            "Authorization",
            "Content-Type",
            "Idempotency-Key",
            "X-Request-ID",
            "X-API-Key",
            END_USER_HEADER,
            VERIFICATION_HEADER,
        ],
        expose_headers=["X-Request-ID", "Retry-After"],
    )
    # The edge's parts (web/edge.py): the lookup hits first, then the caller's check.
    runtime_getter = partial(_runtime, app)
    denials = Denials()
    edge_parts: dict[str, Any] = {
        "first": [LookupDoor(runtime_getter, denials)],
        "doors": [CallerDoor(runtime_getter, denials)],
        "max_body_bytes": settings.MAX_BODY_BYTES,
        "language": Language(settings.MESSAGES_LANGUAGE),
    }
    rate_limited = (
        settings.RATE_LIMIT_PER_MINUTE > 0 or settings.RATE_LIMIT_PER_SUBJECT_PER_MINUTE > 0
    )
    if rate_limited:
        # Every request is counted first: the edge sits behind the limiter, and the outer
        # layers give its answers their request id, access line and metrics.
        app.add_middleware(Edge, routes=routes, **edge_parts)
        app.add_middleware(
            RateLimitMiddleware,
            store=lambda: app.state.runtime.store,
            subject_of=lambda authorization: jwt_subject(app.state.runtime, authorization),
            per_address=settings.RATE_LIMIT_PER_MINUTE,
            per_subject=settings.RATE_LIMIT_PER_SUBJECT_PER_MINUTE,
            audit=lambda: app.state.runtime.audit,
        )
    # The memory store cannot be away, nor be waited for.
    store_seconds = settings.REDIS_TIMEOUT_SECONDS if settings.uses_redis else None
    if settings.uses_redis:
        app.add_middleware(StoreUnavailableMiddleware)
    layer = RequestLayer(
        RequestIds(),
        AccessLog() if settings.ACCESS_LOG else None,
        store_seconds,
        Language(settings.MESSAGES_LANGUAGE),
    )
    app.add_middleware(
        RequestContextMiddleware,
        layer=layer,
        deadline_seconds=settings.UPSTREAM_TIMEOUT_SECONDS,
        rate_limits=lambda: getattr(app.state, "runtime", None) and app.state.runtime.gateway,
    )
    if metrics is not None:
        # Outermost: it sees every answer, the rate limiter's and the edge's too.
        app.add_middleware(MetricsMiddleware, metrics=metrics, routes=routes)
    if not rate_limited:
        app.edge_options = {**edge_parts, "layer": layer, "metrics": metrics}
    install_openapi(app, settings, [partial(document_subjects, settings)])
    # Build the OpenAPI schema now: it also makes FastAPI resolve every route's
    # dependencies here, once, instead of lazily on first requests. Done lazily, two apps
    # in one process (tests run several) raced on the module-level routers' shared state.
    app.openapi()
    return app
