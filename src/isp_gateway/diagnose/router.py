"""HTTP route for diagnose (BEYOND.md): a thin handler over DiagnoseService."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter
from fastapi.responses import Response

from isp_gateway.auth.dependencies import CurrentCaller, Scoped
from isp_gateway.auth.keys import ACCOUNTS_READ, NETWORK_PING
from isp_gateway.auth.scopes import has_scope
from isp_gateway.diagnose.schemas import DEFAULT_WAIT_SECONDS, DiagnoseRequest, DiagnoseResponse
from isp_gateway.diagnose.service import DiagnoseService
from isp_gateway.web.deps import ServiceOf
from isp_gateway.web.envelope import BackendResponse, respond, view_envelope
from isp_gateway.web.params import (
    SERVICE_ROUTE_ERRORS_VERIFIED,
    VERIFIED,
    ServiceIdPath,
    WaitQuery,
    parse_service_id,
)

DiagnoseDep = Annotated[DiagnoseService, ServiceOf(DiagnoseService)]

router = APIRouter(prefix="/api/v1/clients", tags=["network"], dependencies=[Scoped(NETWORK_PING)])


@router.post(
    "/{service_id}/diagnose",
    response_model=BackendResponse[DiagnoseResponse],
    responses=SERVICE_ROUTE_ERRORS_VERIFIED,
    dependencies=[VERIFIED],
)
async def diagnose_client(
    service_id: ServiceIdPath,
    diagnose: DiagnoseDep,
    caller: CurrentCaller,
    body: DiagnoseRequest | None = None,
    wait: WaitQuery = DEFAULT_WAIT_SECONDS,
) -> Response:
    """Why a customer has no internet: cancelled, suspended, a general outage, or a ping."""
    pings = (body or DiagnoseRequest()).pings
    with_debt = has_scope(caller.scopes, ACCOUNTS_READ)
    result = await diagnose.diagnose(parse_service_id(service_id), pings, wait, with_debt=with_debt)
    view = result.view
    meta = {"stale": True} if result.stale else None
    return respond(200, view_envelope(view, meta))
