"""HTTP route for diagnose (BEYOND.md): a thin handler over DiagnoseService."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from isp_gateway.auth.dependencies import current_user
from isp_gateway.clients.schemas import SERVICE_ROUTE_ERRORS, ServiceIdPath
from isp_gateway.clients.service import parse_service_id
from isp_gateway.diagnose.schemas import DEFAULT_WAIT_SECONDS, DiagnoseRequest, DiagnoseResponse
from isp_gateway.envelope import BackendResponse, envelope, respond
from isp_gateway.network.router import WaitQuery
from isp_gateway.runtime import RuntimeDep

router = APIRouter(prefix="/api/v1/clients", tags=["network"], dependencies=[Depends(current_user)])


@router.post(
    "/{service_id}/diagnose",
    response_model=BackendResponse[DiagnoseResponse],
    responses=SERVICE_ROUTE_ERRORS,
)
async def diagnose_client(
    service_id: ServiceIdPath,
    runtime: RuntimeDep,
    body: DiagnoseRequest | None = None,
    wait: WaitQuery = DEFAULT_WAIT_SECONDS,
) -> Response:
    """Why a customer has no internet: cancelled, suspended, a general outage, or a ping."""
    pings = (body or DiagnoseRequest()).pings
    result = await runtime.diagnose.diagnose(parse_service_id(service_id), pings, wait)
    view = result.view
    meta = {"stale": True} if result.stale else None
    return respond(
        200,
        envelope(
            ok=view.ok,
            type=view.type,
            action=view.action,
            data=view.data,
            message=view.message,
            meta=meta,
        ),
    )
