"""GET /api/v1/outages (OUTAGES.md 4): the general outages now active (scope `outages:read`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter

from isp_gateway.auth.dependencies import Scoped
from isp_gateway.auth.keys import OUTAGES_READ
from isp_gateway.kit.actions import Action
from isp_gateway.outages.events import view
from isp_gateway.outages.schemas import Outage
from isp_gateway.outages.service import OutageService
from isp_gateway.web.deps import ServiceOf
from isp_gateway.web.envelope import BackendResponse, error_responses, success

OutagesDep = Annotated[OutageService, ServiceOf(OutageService)]

router = APIRouter(prefix="/api/v1/outages", tags=["network"], dependencies=[Scoped(OUTAGES_READ)])


@router.get("", response_model=BackendResponse[list[Outage]], responses=error_responses(502, 503))
@router.get("/", include_in_schema=False)
async def list_outages(outages: OutagesDep) -> dict[str, Any]:
    """The routers with a general outage now (read at most OUTAGE_CACHE_SECONDS ago), oldest
    first; `data: []` when all is well."""
    active = [view(outage) for outage in await outages.current()]
    return success(Action.OUTAGES_LISTED, active, meta={"count": len(active)})
