"""GET /health (spec 4.1)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from isp_gateway.web.envelope import success

router = APIRouter(tags=["system"])

SERVICE_NAME = "isp-gateway"


@router.get("/health")
async def health() -> dict[str, Any]:
    """Liveness for containers and load balancers; needs no token and no upstream."""
    return success(None, {"status": "ok", "service": SERVICE_NAME})
