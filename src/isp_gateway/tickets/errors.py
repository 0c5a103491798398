"""How a ticket creation is refused or fails: one typed error per answer, and the outcome
(metrics, audit) each one is."""

from __future__ import annotations

from isp_gateway.kit.actions import Action
from isp_gateway.kit.errors import (
    ServiceError,
    StoreUnavailable,
    UpstreamError,
    UpstreamRateLimited,
    UpstreamUnauthorized,
)
from isp_gateway.upstream.tickets import TicketRejected


class ZoneLimitReached(ServiceError):
    status_code = 409
    type = "info"
    action = Action.ZONE_TICKET_LIMIT_REACHED


class TicketCreationFailed(ServiceError):
    status_code = 502
    action = Action.TICKET_CREATION_FAILED
    default_message = "The ticket could not be created"


class ZoneMismatch(ServiceError):
    status_code = 422
    action = Action.ZONE_MISMATCH


class OutageInProgress(ServiceError):
    """OUTAGE_TICKETS=hold: the service's router has an active general outage (OUTAGES.md 4);
    `data` is the outage. Not final: once it ends, the same request opens the ticket."""

    status_code = 409
    type = "info"
    action = Action.OUTAGE_IN_PROGRESS


class TicketAlreadyOpen(ServiceError):
    status_code = 409
    type = "info"
    action = Action.TICKET_ALREADY_OPEN


# Final answers are replayed for an Idempotency-Key's lifetime (DECISIONS.md: "returns the
# first answer"): a created ticket, and these refusals. An unknown service (404) is not final,
# nor is a failure (upstream down, outcome unknown): a repeat with the key tries again, and
# reconciles a POST whose answer was lost.
FINAL_REFUSALS: tuple[type[ServiceError], ...] = (ZoneLimitReached, TicketAlreadyOpen)


def ticket_outcome(error: ServiceError) -> str | None:
    """The outcome (metrics, audit) a creation's refusal is, or None when it is no outcome
    of a creation (an unknown service, a caller's malformed request)."""
    if isinstance(error, ZoneLimitReached):
        return "zone_limit"
    if isinstance(error, TicketAlreadyOpen):
        return "duplicate"
    if isinstance(error, ZoneMismatch):
        return Action.ZONE_MISMATCH
    if isinstance(error, OutageInProgress):
        return Action.OUTAGE_IN_PROGRESS
    if isinstance(error, StoreUnavailable) or error.action == Action.TICKET_CREATION_FAILED:
        return "failed"
    return None


def creation_failure(exc: UpstreamError, what: str) -> TicketCreationFailed:
    """An upstream error as `ticket_creation_failed`, with a safe reason (never the body)."""
    if isinstance(exc, UpstreamRateLimited):
        return TicketCreationFailed(
            "The ISP backend is rate limiting requests; retry shortly",
            status_code=503,
            meta={"reason": Action.UPSTREAM_RATE_LIMITED},
            headers=exc.headers,
        )
    if isinstance(exc, UpstreamUnauthorized):
        return TicketCreationFailed(
            "The ISP backend refused the service's credentials",
            meta={"reason": Action.UPSTREAM_UNAUTHORIZED},
        )
    if isinstance(exc, TicketRejected):
        errors = [{"field": name, "message": message} for name, message in exc.fields]
        message = f"The ISP backend {what} {exc.answer}"
        if errors:
            message += f": {errors[0]['field']}: {errors[0]['message']}"
            if len(errors) > 1:
                message += f" (and {len(errors) - 1} more)"
        if exc.of_request:
            # The request's own fields (an unknown technician): the caller's to fix, not
            # a backend that failed (CALLERS.md, "Answers a bot can say").
            field_name = errors[0]["field"]
            return TicketCreationFailed(
                f"The ISP backend refused the ticket's {field_name}: {errors[0]['message']}",
                status_code=400,
                data={"field": field_name, "errors": errors},
                meta={"reason": "upstream_rejected", "errors": errors},
            )
        return TicketCreationFailed(message, meta={"reason": "upstream_rejected", "errors": errors})
    return TicketCreationFailed(
        f"The ISP backend is not available ({what}); nothing was created, retry shortly",
        meta={"reason": Action.UPSTREAM_UNAVAILABLE},
    )
