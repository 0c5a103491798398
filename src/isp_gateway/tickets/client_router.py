"""HTTP route for a client's open tickets (BEYOND.md): a thin handler over TicketService."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from isp_gateway.auth.dependencies import current_user
from isp_gateway.clients.schemas import SERVICE_ROUTE_ERRORS, ServiceIdPath
from isp_gateway.clients.service import parse_service_id
from isp_gateway.envelope import BackendResponse, respond, success
from isp_gateway.runtime import RuntimeDep
from isp_gateway.tickets.schemas import OpenTicketResponse

router = APIRouter(prefix="/api/v1/clients", tags=["tickets"], dependencies=[Depends(current_user)])


@router.get(
    "/{service_id}/tickets",
    response_model=BackendResponse[list[OpenTicketResponse]],
    responses=SERVICE_ROUTE_ERRORS,
)
async def list_client_tickets(service_id: ServiceIdPath, runtime: RuntimeDep) -> Response:
    """The client's active tickets, newest first (served from the cached ticket sweep)."""
    tickets, stale = await runtime.tickets.client_tickets(parse_service_id(service_id))
    meta = {"stale": True} if stale else None
    return respond(200, success("tickets_listed", tickets, meta=meta))
