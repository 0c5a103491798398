"""Request and response models of the ticket endpoints (spec 2.3, 4.7-4.11; DECISIONS.md)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from isp_gateway.kit.models import NON_BLANK, RequestModel


class CreateTicketRequest(RequestModel):
    service_id: int = Field(
        ge=1,
        description="Service the ticket belongs to: 1 to 10 digits (else 400 invalid_service_id)",
    )
    subject: str = Field(min_length=1, max_length=200, description="One subject of 4.7, as is")
    description: str = Field(
        min_length=1, max_length=5000, pattern=NON_BLANK, description="What is wrong (not blank)"
    )
    technician_id: int = Field(ge=1, description="Assigned technician (upstream staff id)")
    zone_id: int = Field(
        description="Zone of the customer; must match the zone of the service's client record "
        "(else 422 zone_mismatch); the per-zone cap applies to the record's zone"
    )


class TicketResponse(BaseModel):
    """Ticket (spec 2.3)."""

    ticket_id: int
    subject: str
    created_at: str = Field(description="YYYY-MM-DD HH:MM in the service's time zone")
    end_date: str = Field(description="created_at + MAX_TICKET_RESOLUTION_DAYS business days")
    status_ticket: str
    priority: str = Field(description="'1' low, '2' normal, '3' high, '4' very high")
    answer_text: str | None = None


class TicketDetailResponse(BaseModel):
    """Ticket (spec 2.3) plus the fields of the get-ticket endpoint."""

    ticket_id: int
    subject: str | None
    created_at: str | None
    end_date: str | None
    status_ticket: str | None
    priority: str | None
    answer_text: str | None
    service_id: int | None
    description: str | None
    technician_id: int | None
    technician_name: str | None = Field(
        default=None, description="The upstream names the technician rather than its id"
    )


class SubjectsByPriority(BaseModel):
    low: list[str]
    normal: list[str]
    high: list[str]
    very_high: list[str]


class SubjectsResponse(BaseModel):
    by_priority: SubjectsByPriority
    all: list[str]


class ZoneStatusResponse(BaseModel):
    zone_id: int
    is_blocked: bool
    active_tickets: int
    max_tickets: int


class ZoneLimitData(BaseModel):
    max_tickets: int
    active_tickets: int


class OpenTicketResponse(BaseModel):
    """An active ticket as `/clients/{id}/tickets` lists it (BEYOND.md)."""

    ticket_id: int
    subject: str | None
    status_ticket: str | None
    priority: str | None = Field(description="'1' low, '2' normal, '3' high, '4' very high")
    created_at: str | None = Field(description="YYYY-MM-DD HH:MM")
    end_date: str | None = Field(description="YYYY-MM-DD HH:MM")
    technician: str | None = Field(
        description="The technician's name; the upstream's email_tecnico when it names none"
    )
