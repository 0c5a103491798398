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


# The step of a creation the upstream failed (its messages' variants in kit/messages.py).
COUNTING = "counting"
POSTING = "posting"


def creation_failure(exc: UpstreamError, what: str) -> TicketCreationFailed:
    """An upstream error as `ticket_creation_failed`, with a safe reason (never the body)."""
    if isinstance(exc, UpstreamRateLimited):
        return TicketCreationFailed(
            variant="throttled",
            status_code=503,
            meta={"reason": Action.UPSTREAM_RATE_LIMITED},
            headers=exc.headers,
        )
    if isinstance(exc, UpstreamUnauthorized):
        return TicketCreationFailed(
            variant="unauthorized",
            meta={"reason": Action.UPSTREAM_UNAUTHORIZED},
        )
    if isinstance(exc, TicketRejected):
        errors = [{"field": name, "message": message} for name, message in exc.fields]
        # `what` is the step (kit/messages.py's "counting" or "posting"), the rest the
        # backend's own words.
        detail = exc.answer
        if errors:
            detail += f": {errors[0]['field']}: {errors[0]['message']}"
            if len(errors) > 1:
                detail += f" (and {len(errors) - 1} more)"
        if exc.of_request:
            # The request's own fields (an unknown technician): the caller's to fix, not
            # a backend that failed (CALLERS.md, "Answers a bot can say").
            field_name = errors[0]["field"]
            return TicketCreationFailed(
                variant="field",
                params={"field": field_name, "detail": errors[0]["message"]},
                status_code=400,
                data={"field": field_name, "errors": errors},
                meta={"reason": "upstream_rejected", "errors": errors},
            )
        return TicketCreationFailed(
            variant=f"rejected_{what}",
            params={"detail": detail},
            meta={"reason": "upstream_rejected", "errors": errors},
        )
    return TicketCreationFailed(
        variant=f"unavailable_{what}",
        meta={"reason": Action.UPSTREAM_UNAVAILABLE},
    )
