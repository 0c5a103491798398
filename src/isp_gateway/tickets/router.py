"""HTTP routes for tickets (spec 4.7-4.11): thin handlers over TicketService.

Creation: the service returns the created ticket or raises a typed refusal (rendered by the
error handler); with an `Idempotency-Key` the answer goes through the service's `Idempotency`,
which replays a final answer (the ticket, the zone cap, the duplicate) as it was first sent."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from isp_gateway.auth.dependencies import Scoped
from isp_gateway.auth.keys import TICKETS_READ, TICKETS_WRITE
from isp_gateway.kit.actions import Action
from isp_gateway.outages.schemas import Outage
from isp_gateway.tickets.schemas import (
    CreateTicketRequest,
    OpenTicketResponse,
    SubjectsResponse,
    TicketDetailResponse,
    TicketResponse,
    ZoneLimitData,
    ZoneStatusResponse,
)
from isp_gateway.tickets.service import TicketService
from isp_gateway.web.deps import ServiceOf
from isp_gateway.web.envelope import BackendResponse, error_responses, render, success
from isp_gateway.web.params import (
    VERIFICATION_ERRORS,
    IdempotencyKey,
    VerificationIdHeader,
    parse_service_id,
    require_verification,
)

TicketsDep = Annotated[TicketService, ServiceOf(TicketService)]

router = APIRouter(prefix="/api/v1/tickets", tags=["tickets"])

_CREATE_RESPONSES = (
    error_responses(
        400,
        404,
        409,
        422,
        502,
        503,
        actions={
            400: [Action.TICKET_CREATION_FAILED, Action.INVALID_SERVICE_ID],
            404: Action.CLIENT_NOT_FOUND,
            409: [
                Action.ZONE_TICKET_LIMIT_REACHED,
                Action.TICKET_ALREADY_OPEN,
                Action.OUTAGE_IN_PROGRESS,
                Action.IDEMPOTENCY_KEY_IN_PROGRESS,
            ],
            422: [Action.VALIDATION_ERROR, Action.ZONE_MISMATCH, Action.IDEMPOTENCY_KEY_REUSED],
            502: Action.TICKET_CREATION_FAILED,
            503: Action.TICKET_CREATION_FAILED,
        },
        # The zone cap's 409 carries the counts; the duplicate guard's the open ticket; the
        # outage hold's (OUTAGE_TICKETS=hold) the outage.
        models={409: BackendResponse[ZoneLimitData | OpenTicketResponse | Outage]},
    )
    | VERIFICATION_ERRORS
)
_CREATE_RESPONSES[409]["description"] = (
    "Not opened, and nothing was sent to the ISP backend. `action`: `zone_ticket_limit_reached` "
    "(`type` info; `data`: the counts), `ticket_already_open` (`type` info; `data`: the open "
    "ticket), `outage_in_progress` (`type` info, only with OUTAGE_TICKETS=hold; `data`: the "
    "general outage on the service's router), `idempotency_key_in_progress`."
)
# The 400 and the 502 say why in `meta.reason` too (tickets/service.py, errors.py).
_CREATE_RESPONSES[400]["description"] = (
    "Not opened. `action`: `ticket_creation_failed`; `meta.reason`: `unknown_subject` (the "
    "subject is not in GET /api/v1/tickets/subjects; `meta.closest`: the nearest one), or "
    "`upstream_rejected` (the ISP backend refused a field of the request, such as an unknown "
    "`technician_id`: `data.field` names it, `data.errors` and `meta.errors` list "
    "`{field, message}`)."
)
_CREATE_RESPONSES[502]["description"] = (
    "The ISP backend failed. `action`: `ticket_creation_failed`; `meta.reason`: "
    "`outcome_unknown` (the creation was sent and its answer lost: it may exist; repeat the "
    "same request, with or without its Idempotency-Key: the service finds that ticket before "
    "opening another), `upstream_rejected` (the backend refused it; `meta.errors`), "
    "`upstream_unavailable` (down or timed out; nothing was created), `upstream_unauthorized` "
    "(the backend refused the service's key)."
)
# A creation's 503 is more than the backend's rate limit: `meta.reason` says which refusal,
# and none of them created anything.
_CREATE_RESPONSES[503]["description"] = (
    "Nothing was created; retry after `Retry-After` (the same Idempotency-Key is safe). "
    "`meta.reason`: `upstream_rate_limited` (the ISP backend's limit), `zone_busy` (another "
    "creation in the zone held it past the request's time, or its POST got no answer and its "
    "ticket, which may take the zone's last slot, has not shown yet), `server_stopping` (this "
    "replica is stopping; another answers), `outcome_pending` (this same request's earlier "
    "POST got no answer and may still be carried out by a slow backend: its ticket is looked "
    "for again on the repeat). `action`: `ticket_creation_failed`."
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
    return success(Action.TICKET_SUBJECTS_LISTED, tickets.subjects())


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
    return success(Action.TICKET_FOUND, await tickets.zone_status(zone_id))


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
    # A service id in the body is one as a path's is (CALLERS.md 2): 400, never upstream.
    parse_service_id(str(body.service_id))
    # With REQUIRE_VERIFICATION, only for a service this caller and end user verified.
    await require_verification(request, body.service_id)
    order = await tickets.order(body)
    return render(await tickets.create(order, idempotency_key))


@router.get(
    "/{ticket_id}",
    dependencies=[Scoped(TICKETS_READ)],
    response_model=BackendResponse[TicketDetailResponse],
    responses=error_responses(404, 502, 503, actions={404: Action.TICKET_NOT_FOUND}),
)
@router.get("/{ticket_id}/", dependencies=[Scoped(TICKETS_READ)], include_in_schema=False)
async def get_ticket(ticket_id: int, tickets: TicketsDep) -> dict[str, Any]:
    """One ticket with its latest answer."""
    return success(Action.TICKET_FOUND, await tickets.get(ticket_id))
