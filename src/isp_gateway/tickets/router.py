"""HTTP routes for tickets (spec 4.7-4.11): thin handlers over TicketService.

Creation: the service returns the created ticket or raises a typed refusal (rendered by the
error handler); with an `Idempotency-Key` the answer goes through the service's `Idempotency`,
which replays a final answer (the ticket, the zone cap, the duplicate) as it was first sent."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse

from isp_gateway.auth.dependencies import Scoped
from isp_gateway.auth.keys import TICKETS_READ, TICKETS_WRITE
from isp_gateway.kit.idempotency import Answer
from isp_gateway.services import TicketsDep
from isp_gateway.tickets.schemas import (
    CreateTicketRequest,
    OpenTicketResponse,
    SubjectsResponse,
    TicketDetailResponse,
    TicketResponse,
    ZoneLimitData,
    ZoneStatusResponse,
)
from isp_gateway.tickets.service import FINAL_REFUSALS
from isp_gateway.tickets.views import ticket_answer
from isp_gateway.web.envelope import BackendResponse, error_responses, success
from isp_gateway.web.params import VERIFICATION_ERRORS, VerificationIdHeader, require_verification

router = APIRouter(prefix="/api/v1/tickets", tags=["tickets"])

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        max_length=255,
        description="A repeat with the same key within 24 h returns the first answer",
    ),
]

_CREATE_RESPONSES = (
    error_responses(
        400,
        404,
        409,
        422,
        502,
        503,
        actions={
            400: "ticket_creation_failed",
            404: "client_not_found",
            409: [
                "zone_ticket_limit_reached",
                "ticket_already_open",
                "idempotency_key_in_progress",
            ],
            422: ["validation_error", "zone_mismatch", "idempotency_key_reused"],
            502: "ticket_creation_failed",
            503: "ticket_creation_failed",
        },
        # The zone cap's 409 carries the counts; the duplicate guard's the open ticket.
        models={409: BackendResponse[ZoneLimitData | OpenTicketResponse]},
    )
    | VERIFICATION_ERRORS
)
# A creation's 503 is more than the backend's rate limit: `meta.reason` says which refusal,
# and none of them created anything.
_CREATE_RESPONSES[503]["description"] = (
    "Nothing was created; retry after `Retry-After` (the same Idempotency-Key is safe). "
    "`meta.reason`: `upstream_rate_limited` (the ISP backend's limit), `zone_busy` (another "
    "creation in the zone held it past the request's time), `server_stopping` (this replica "
    "is stopping; another answers). `action`: `ticket_creation_failed`."
)


# Declared before /{ticket_id} so these paths are never read as an id.
@router.get(
    "/subjects",
    dependencies=[Scoped(TICKETS_READ)],
    response_model=BackendResponse[SubjectsResponse],
)
@router.get("/subjects/", dependencies=[Scoped(TICKETS_READ)], include_in_schema=False)
async def list_ticket_subjects(tickets: TicketsDep) -> dict[str, Any]:
    """Valid ticket subjects, grouped by priority and as one flat list."""
    return success("ticket_subjects_listed", tickets.subjects())


@router.get(
    "/zone-blocked/{zone_id}",
    dependencies=[Scoped(TICKETS_READ)],
    response_model=BackendResponse[ZoneStatusResponse],
    responses=error_responses(502, 503),
)
@router.get(
    "/zone-blocked/{zone_id}/", dependencies=[Scoped(TICKETS_READ)], include_in_schema=False
)
async def get_zone_status(zone_id: int, tickets: TicketsDep) -> dict[str, Any]:
    """Whether a zone has reached its cap of active tickets."""
    return success("ticket_found", await tickets.zone_status(zone_id))


@router.post(
    "",
    dependencies=[Scoped(TICKETS_WRITE)],
    status_code=201,
    response_model=BackendResponse[TicketResponse],
    responses=_CREATE_RESPONSES,
)
@router.post("/", dependencies=[Scoped(TICKETS_WRITE)], status_code=201, include_in_schema=False)
async def create_ticket(
    request: Request,
    body: CreateTicketRequest,
    tickets: TicketsDep,
    idempotency_key: IdempotencyKey = None,
    verification_id: VerificationIdHeader = None,
) -> JSONResponse:
    """Open a support ticket, unless the customer's zone is at its cap."""
    # With REQUIRE_VERIFICATION, only for a service this caller and end user verified.
    await require_verification(request, body.service_id)
    order = await tickets.order(body)

    async def created() -> Answer:
        ticket = await tickets.create(order)
        return Answer(201, success("ticket_created", ticket_answer(ticket)))

    answer = await tickets.idempotency.run(
        idempotency_key, order.fingerprint, created, final=FINAL_REFUSALS
    )
    return answer.response()


@router.get(
    "/{ticket_id}",
    dependencies=[Scoped(TICKETS_READ)],
    response_model=BackendResponse[TicketDetailResponse],
    responses=error_responses(404, 502, 503, actions={404: "ticket_not_found"}),
)
@router.get("/{ticket_id}/", dependencies=[Scoped(TICKETS_READ)], include_in_schema=False)
async def get_ticket(ticket_id: int, tickets: TicketsDep) -> dict[str, Any]:
    """One ticket with its latest answer."""
    return success("ticket_found", await tickets.get(ticket_id))
