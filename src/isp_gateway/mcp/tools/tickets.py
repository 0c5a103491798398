"""The ticket tools: the verified customer's open tickets, opening one (REST's one write
path: `order_for_service` then `create(order, key)`), and the subject catalogue."""

from __future__ import annotations

from pydantic import Field, ValidationError

from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.kit.errors import InvalidInput
from isp_gateway.mcp.tools.base import (
    Call,
    NoArgs,
    Outcome,
    ToolFailure,
    ToolSpec,
    Verified,
    verified_description,
)
from isp_gateway.mcp.tools.outages import held_ticket
from isp_gateway.tickets.errors import OutageInProgress, TicketCreationFailed

# Where an agent's Idempotency-Key lives: its own, per caller and end user, so one agent
# can neither replay nor block another's.
KEY_SCOPE = "mcp"


class TicketArgs(Verified):
    subject: str = Field(
        min_length=1, max_length=200, description="One subject of list_ticket_subjects, as listed"
    )
    description: str = Field(min_length=1, max_length=5000, description="What is wrong")
    idempotency_key: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Optional: send the same key again when retrying this very request (a "
        "timeout, a lost answer): the first answer comes back instead of a second ticket",
    )


SUBJECT_HINT = (
    "Call list_ticket_subjects and pass one subject exactly as listed{closest}; the customer's "
    "own words go in description."
)
# What the agent does next when a ticket cannot be opened, by the refusal's reason.
_NO_TICKET_HINTS = {
    "no_technician": (
        "This customer's record has no technician and the gateway has no "
        "DEFAULT_TECHNICIAN_ID: no ticket can be opened here. Tell the customer and refer them "
        "to the ISP's support line; the operator can set DEFAULT_TECHNICIAN_ID."
    ),
    "no_zone": (
        "This customer's record has no zone, so the zone's ticket cap cannot be counted: no "
        "ticket can be opened here. Refer the customer to the ISP's support line."
    ),
}


async def customer_tickets(call: Call, service_id: int, _: Verified) -> Outcome:
    listed, _stale = await call.services.tickets.client_tickets(service_id)
    if listed:
        sentence = messages.say(Action.TICKETS_LISTED, "count", count=len(listed))
    else:
        sentence = messages.say(Action.TICKETS_LISTED, "none")
    return Outcome({"tickets": listed}, sentence)


async def open_ticket(call: Call, service_id: int, args: TicketArgs) -> Outcome:
    tickets = call.services.tickets
    try:
        # The REST write path (tickets/service.py): the zone cap, the duplicate guard and the
        # lock, with the zone and the technician of the client record.
        order = await tickets.order_for_service(service_id, args.subject, args.description)
    except InvalidInput as refused:
        # An unknown subject: the catalogue's sentence names it and the closest one.
        closest = (refused.meta or {}).get("closest")
        raise ToolFailure(
            refused.action,
            refused.message,
            SUBJECT_HINT.format(closest=f" (the closest: '{closest}')" if closest else ""),
            reason="unknown_subject",
            closest=closest,
        ) from None
    except ValidationError:
        raise ToolFailure(
            "invalid_arguments",
            messages.say(Action.VALIDATION_ERROR),
            "subject and description must be non-empty texts.",
        ) from None
    key = None
    if args.idempotency_key:
        caller = call.caller
        key = f"{KEY_SCOPE}|{caller.caller}|{caller.end_user}|{args.idempotency_key}"
    try:
        answer = await tickets.create(order, key)
    except OutageInProgress as held:
        # OUTAGE_TICKETS=hold: not an error, news (OUTAGES.md 4).
        return held_ticket(held)
    except TicketCreationFailed as failed:
        reason = (failed.meta or {}).get("reason", "")
        hint = _NO_TICKET_HINTS.get(reason)
        if hint is None:
            raise
        raise ToolFailure(failed.action, failed.message, hint, reason=reason) from None
    body = answer.body
    replayed = {"replayed": True} if answer.headers.get("Idempotent-Replayed") else {}
    data = body["data"] or {}
    if body["action"] == Action.ZONE_TICKET_LIMIT_REACHED:
        return Outcome(
            {"outcome": body["action"], **data, **replayed},
            messages.say(Action.ZONE_TICKET_LIMIT_REACHED),
            "The zone is at its cap: no ticket until one is resolved; the technicians already "
            "know of the area's problem.",
        )
    if body["action"] == Action.TICKET_ALREADY_OPEN:
        return Outcome(
            {"outcome": body["action"], "ticket": data, **replayed},
            messages.say(Action.TICKET_ALREADY_OPEN, "number", ticket_id=data.get("ticket_id")),
        )
    if data.get("end_date"):
        sentence = messages.say(
            Action.TICKET_CREATED,
            "number_due",
            ticket_id=data.get("ticket_id"),
            end=data["end_date"],
        )
    else:
        sentence = messages.say(Action.TICKET_CREATED, "number", ticket_id=data.get("ticket_id"))
    return Outcome({"outcome": Action.TICKET_CREATED, "ticket": data, **replayed}, sentence)


async def list_ticket_subjects(call: Call, _: NoArgs) -> Outcome:
    subjects = call.services.tickets.subjects()
    return Outcome(subjects, messages.say(Action.TICKET_SUBJECTS_LISTED))


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "customer_tickets",
        "tickets:read",
        verified_description("The verified customer's open support tickets, newest first."),
        Verified,
        read_only=True,
        on_service=customer_tickets,
    ),
    ToolSpec(
        "open_ticket",
        "tickets:write",
        verified_description(
            "Open a support ticket for the verified customer (zone and technician come from "
            "the customer's record). Use diagnose_connection first; the subject must be one "
            "of list_ticket_subjects. May answer that the zone is at its cap, that a "
            "ticket for that subject is already open, or that a general outage covers the "
            "customer (no ticket needed). Retrying after a timeout? Send the same "
            "idempotency_key."
        ),
        TicketArgs,
        read_only=False,
        on_service=open_ticket,
    ),
    ToolSpec(
        "list_ticket_subjects",
        "tickets:read",
        "The valid ticket subjects for open_ticket, by priority (no verification needed).",
        NoArgs,
        read_only=True,
        plain=list_ticket_subjects,
    ),
)
