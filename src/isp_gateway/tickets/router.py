"""HTTP routes for tickets (spec 4.7-4.11): thin handlers over TicketService."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header
from fastapi.responses import JSONResponse

from isp_gateway.auth.dependencies import current_user
from isp_gateway.envelope import BackendResponse, error_responses, respond, success
from isp_gateway.runtime import RuntimeDep
from isp_gateway.tickets.schemas import (
    CreateTicketRequest,
    OpenTicketResponse,
    SubjectsResponse,
    TicketDetailResponse,
    TicketResponse,
    ZoneLimitData,
    ZoneStatusResponse,
)

router = APIRouter(prefix="/api/v1/tickets", tags=["tickets"], dependencies=[Depends(current_user)])

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        max_length=255,
        description="A repeat with the same key within 24 h returns the first answer",
    ),
]

_CREATE_RESPONSES = error_responses(
    400,
    404,
    409,
    422,
    502,
    503,
    actions={
        400: "ticket_creation_failed",
        404: "client_not_found",
        409: ["zone_ticket_limit_reached", "ticket_already_open", "idempotency_key_in_progress"],
        422: ["validation_error", "idempotency_key_reused"],
        502: "ticket_creation_failed",
        503: "ticket_creation_failed",
    },
    # The zone cap's 409 carries the counts; the duplicate guard's the open ticket.
    models={409: BackendResponse[ZoneLimitData | OpenTicketResponse]},
)


# Declared before /{ticket_id} so these paths are never read as an id.
@router.get("/subjects", response_model=BackendResponse[SubjectsResponse])
@router.get("/subjects/", include_in_schema=False)
async def list_ticket_subjects(runtime: RuntimeDep) -> dict[str, Any]:
    """Valid ticket subjects, grouped by priority and as one flat list."""
    return success("ticket_subjects_listed", runtime.tickets.subjects())


@router.get(
    "/zone-blocked/{zone_id}",
    response_model=BackendResponse[ZoneStatusResponse],
    responses=error_responses(502, 503),
)
@router.get("/zone-blocked/{zone_id}/", include_in_schema=False)
async def get_zone_status(zone_id: int, runtime: RuntimeDep) -> dict[str, Any]:
    """Whether a zone has reached its cap of active tickets."""
    return success("ticket_found", await runtime.tickets.zone_status(zone_id))


@router.post(
    "",
    status_code=201,
    response_model=BackendResponse[TicketResponse],
    responses=_CREATE_RESPONSES,
)
@router.post("/", status_code=201, include_in_schema=False)
async def create_ticket(
    body: CreateTicketRequest, runtime: RuntimeDep, idempotency_key: IdempotencyKey = None
) -> JSONResponse:
    """Open a support ticket, unless the customer's zone is at its cap."""
    outcome = await runtime.tickets.create(body, idempotency_key)
    return respond(outcome.status_code, outcome.body, outcome.headers)


@router.get(
    "/{ticket_id}",
    response_model=BackendResponse[TicketDetailResponse],
    responses=error_responses(404, 502, 503, actions={404: "ticket_not_found"}),
)
@router.get("/{ticket_id}/", include_in_schema=False)
async def get_ticket(ticket_id: int, runtime: RuntimeDep) -> dict[str, Any]:
    """One ticket with its latest answer."""
    return success("ticket_found", await runtime.tickets.get(ticket_id))
