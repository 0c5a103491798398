"""Response models of the account endpoints (BEYOND.md): OpenAPI documentation only."""

from __future__ import annotations

from pydantic import BaseModel, Field


class PendingInvoiceResponse(BaseModel):
    invoice_id: int
    total: float
    issued_on: str | None = Field(default=None, description="YYYY-MM-DD")
    due_on: str | None = Field(default=None, description="YYYY-MM-DD")
    overdue: bool = Field(description="due_on is before today in TIMEZONE")


class ActivePromiseResponse(BaseModel):
    """A payment promise made through the gateway whose date has not passed and whose
    invoice is still owed (MONEY.md 1)."""

    until: str = Field(description="YYYY-MM-DD")
    invoice_id: int


class AccountResponse(BaseModel):
    service_id: int
    service_state: str = Field(description="active, suspended, cancelled, free or unknown")
    invoice_status: str | None = Field(
        default=None, description="The upstream's estado_facturas, unchanged"
    )
    balance: float | None = Field(default=None, description="saldo; negative = credit")
    cut_off_date: str | None = Field(default=None, description="YYYY-MM-DD")
    pending_invoices: list[PendingInvoiceResponse] = Field(description="Oldest due first")
    total_due: float
    as_of: str = Field(description="When the pending-invoice list was read (YYYY-MM-DD HH:MM)")
    promise: ActivePromiseResponse | None = Field(
        default=None, description="The active payment promise, null when none"
    )


class PaymentMethodResponse(BaseModel):
    id: int
    name: str
