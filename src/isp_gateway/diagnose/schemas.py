"""Request and response models of diagnose (BEYOND.md "POST /clients/{id}/diagnose")."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from isp_gateway.accounts.schemas import ActivePromiseResponse, PendingInvoiceResponse
from isp_gateway.kit.models import RequestModel
from isp_gateway.network.schemas import MAX_PINGS
from isp_gateway.tickets.schemas import OpenTicketResponse

DEFAULT_PINGS = 4
DEFAULT_WAIT_SECONDS = 20.0


class DiagnoseRequest(RequestModel):
    pings: int = Field(
        default=DEFAULT_PINGS, ge=1, le=MAX_PINGS, description="ICMP packets to send (1-20)."
    )


class DiagnoseResponse(BaseModel):
    """Every answer carries the first six fields; the others belong to one outcome."""

    service_id: int
    service_state: str = Field(description="active, suspended, cancelled, free or unknown")
    zone_id: int | None
    zone_blocked: bool = Field(description="The zone is at its cap of active tickets")
    open_tickets: list[OpenTicketResponse] = Field(description="As /clients/{id}/tickets")
    promise: ActivePromiseResponse | None = Field(
        default=None, description="The active payment promise, null when none"
    )
    # service_suspended; what is owed only for a caller holding accounts:read
    balance: float | None = Field(
        default=None, description="service_suspended, with accounts:read: as /account"
    )
    total_due: float | None = Field(
        default=None, description="service_suspended, with accounts:read: as /account"
    )
    pending_invoices: list[PendingInvoiceResponse] | None = Field(
        default=None, description="service_suspended, with accounts:read: as /account"
    )
    next_step: Literal["pay", "promise", "reconnect"] | None = Field(
        default=None,
        description='service_suspended: "promise" when total_due > 0 and a payment promise is '
        'allowed (offer paying, or the promise), "pay" when total_due > 0 otherwise, else '
        '"reconnect"',
    )
    # zone_outage
    outage_description: str | None = None
    # the ping's outcomes (ping_pending: figures null)
    task_id: str | None = None
    sent: int | None = None
    received: int | None = None
    loss_percent: float | None = None
