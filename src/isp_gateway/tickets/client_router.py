"""HTTP route for a client's open tickets (BEYOND.md): a thin handler over TicketService."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from isp_gateway.auth.dependencies import Scoped
from isp_gateway.auth.keys import TICKETS_READ
from isp_gateway.kit.actions import Action
from isp_gateway.tickets.router import TicketsDep
from isp_gateway.tickets.schemas import OpenTicketResponse
from isp_gateway.web.envelope import BackendResponse, respond, success
from isp_gateway.web.params import (
    SERVICE_ROUTE_ERRORS_VERIFIED,
    VERIFIED,
    ServiceIdPath,
    parse_service_id,
)

router = APIRouter(prefix="/api/v1/clients", tags=["tickets"], dependencies=[Scoped(TICKETS_READ)])


@router.get(
    "/{service_id}/tickets",
    response_model=BackendResponse[list[OpenTicketResponse]],
    responses=SERVICE_ROUTE_ERRORS_VERIFIED,
    dependencies=[VERIFIED],
)
async def list_client_tickets(service_id: ServiceIdPath, tickets: TicketsDep) -> Response:
    """The client's active tickets, newest first (served from the cached ticket sweep)."""
    listed, stale = await tickets.client_tickets(parse_service_id(service_id))
    meta = {"stale": True} if stale else None
    return respond(200, success(Action.TICKETS_LISTED, listed, meta=meta))
