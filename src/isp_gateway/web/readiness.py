"""GET /ready, and the answer every request gets while the shared store is away.

`/health` is the liveness probe and touches nothing; `/ready` tells a load balancer whether
this replica can serve: the store answers, the client list has loaded at least once, and
the upstream does not refuse our key.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from isp_gateway.kit.errors import StoreUnavailable
from isp_gateway.runtime import Runtime, RuntimeDep
from isp_gateway.web.envelope import envelope
from isp_gateway.web.middleware import answer_errors

router = APIRouter(tags=["system"])

# A probe must answer well within a load balancer's probe timeout (usually 1-5 s).
CHECK_SECONDS = 2.0
AUTH_PREFIX = "/api/v1/auth/"


async def _store_check(runtime: Runtime) -> str:
    try:
        await asyncio.wait_for(runtime.store.get("ready:probe"), CHECK_SECONDS)
    except (StoreUnavailable, TimeoutError):
        return "unavailable"
    return "ok"


async def _clients_check(runtime: Runtime) -> str:
    cache = runtime.services.clients.cache
    if cache.local is not None:
        return "ok"  # this process has held the list: it has loaded at least once
    try:
        # Another worker sharing the store may have loaded it.
        at = await asyncio.wait_for(cache.loaded_at(), CHECK_SECONDS)
    except (StoreUnavailable, TimeoutError):
        at = None
    if at is not None:
        return "ok"
    try:
        # Or be loading it for the first time: `loading 12000/20000` (issue 28).
        progress = await asyncio.wait_for(cache.progress(), CHECK_SECONDS)
    except (StoreUnavailable, TimeoutError):
        progress = None
    return "not_loaded" if progress is None else progress.label()


def _upstream_check(runtime: Runtime) -> str:
    """`unauthorized` while the upstream's last word about our key was a 401/403 (a wrong
    or revoked UPSTREAM_NET_KEY: nothing this replica asks will be answered). An upstream
    that is merely down is not a reason to leave the pool: cached copies still serve."""
    return "unauthorized" if runtime.gateway.key_refused else "ok"


# Operating endpoints stay out of the integrators' OpenAPI; README's "Operating it" has them.
@router.get("/ready", include_in_schema=False)
async def ready(runtime: RuntimeDep) -> JSONResponse:
    """Readiness for load balancers: 200 when the store answers, the client list has
    loaded at least once and the upstream accepts our key, else 503 naming the failing
    check. No token."""
    checks = {
        "store": await _store_check(runtime),
        "clients": await _clients_check(runtime),
        "upstream": _upstream_check(runtime),
    }
    failing = [name for name, result in checks.items() if result != "ok"]
    body: dict[str, Any] = {"status": "ready" if not failing else "not_ready", "checks": checks}
    if failing:
        body["failing"] = failing
    return JSONResponse(body, status_code=503 if failing else 200)


class StoreUnavailableMiddleware:
    """The clear answer for a store failure raised outside FastAPI's handlers (the rate
    limiter, the lookup fast path): 503 `store_unavailable`, in the token endpoint's
    `{"detail": ...}` shape there, instead of a traceback. Inside the routes the service
    error handler renders it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def answer(exc: StoreUnavailable) -> None:
            if scope["path"].startswith(AUTH_PREFIX):
                body: dict[str, Any] = {"detail": exc.message}
            else:
                body = envelope(ok=False, type="error", action=exc.action, message=exc.message)
            response = JSONResponse(body, status_code=exc.status_code, headers=exc.headers)
            await response(scope, receive, send)

        await answer_errors(self.app, scope, receive, send, StoreUnavailable, answer)
