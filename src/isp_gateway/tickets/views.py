"""A ticket in the API's words, built in one place: the ticket of spec 2.3 (creation), its
detail (`GET /tickets/{id}`) and the listed open ticket (`/clients/{id}/tickets`, diagnose).

The key order is the answer's (the envelopes are compared byte for byte)."""

from __future__ import annotations

from typing import Any

from isp_gateway.upstream.tickets import Ticket


def ticket_answer(ticket: Ticket) -> dict[str, Any]:
    """The ticket of spec 2.3, as `POST /tickets` answers it (`TicketResponse`)."""
    return {
        "ticket_id": ticket.ticket_id,
        "subject": ticket.subject,
        "created_at": ticket.created_at,
        "end_date": ticket.end_date,
        "status_ticket": ticket.status_label,
        "priority": ticket.priority,
        "answer_text": ticket.answer_text,
    }


def ticket_detail(ticket: Ticket, technician_id: int | None) -> dict[str, Any]:
    """The ticket of spec 2.3 and what `GET /tickets/{id}` adds (`TicketDetailResponse`);
    `technician_id` as known (the upstream's, else the one this service sent)."""
    return {
        **ticket_answer(ticket),
        "service_id": ticket.service_id,
        "description": ticket.description,
        "technician_id": technician_id,
        "technician_name": ticket.technician_name,
    }


def ticket_view(ticket: Ticket) -> dict[str, Any]:
    """A ticket as `/clients/{id}/tickets` lists it (BEYOND.md, `OpenTicketResponse`)."""
    answer = ticket_answer(ticket)
    listed = ("ticket_id", "subject", "status_ticket", "priority", "created_at", "end_date")
    return {
        **{field: answer[field] for field in listed},
        "technician": ticket.technician_name or ticket.technician_email,
    }
