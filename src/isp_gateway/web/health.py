"""GET /health (spec 4.1) and GET /ready, the probes of containers and load balancers.

`/health` is the liveness probe and touches nothing; `/ready` tells a load balancer whether
this replica can serve: the store answers, the client list has loaded at least once, and
the upstream does not refuse our key (the checks are the running service's own,
services.Runtime.readiness).
"""

from __future__ import annotations

from typing import Any, Protocol

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from isp_gateway.web.envelope import success

router = APIRouter(tags=["system"])

SERVICE_NAME = "isp-gateway"


class Probed(Protocol):
    async def readiness(self) -> dict[str, str]:
        """Each check's name and "ok", or what is wrong."""
        ...


@router.get("/health")
async def health() -> dict[str, Any]:
    """Liveness for containers and load balancers; needs no token and no upstream."""
    return success(None, {"status": "ok", "service": SERVICE_NAME})


# Operating endpoints stay out of the integrators' OpenAPI; the operations guide has them.
@router.get("/ready", include_in_schema=False)
async def ready(request: Request) -> JSONResponse:
    """Readiness for load balancers: 200 when the store answers, the client list has
    loaded at least once and the upstream accepts our key, else 503 naming the failing
    check. No token."""
    runtime: Probed = request.app.state.runtime
    checks = await runtime.readiness()
    failing = [name for name, result in checks.items() if result != "ok"]
    body: dict[str, Any] = {"status": "ready" if not failing else "not_ready", "checks": checks}
    if failing:
        body["failing"] = failing
    return JSONResponse(body, status_code=503 if failing else 200)
