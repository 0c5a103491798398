"""Request and response models of the client endpoints (OpenAPI and validation)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from isp_gateway.models import RequestModel


class ClientResponse(BaseModel):
    """Spec 2.2: `service_id` is always an integer, every other field may be null."""

    service_id: int
    name: str | None = None
    document: str | None = None
    phone: str | None = None
    address: str | None = None
    city: str | None = None
    locality: str | None = None
    payment_status: str | None = None
    zone_id: int | None = None
    antenna_ip: str | None = None
    cut_off_date: str | None = Field(default=None, description="YYYY-MM-DD")
    outstanding_balance: float | None = None
    lan_interface: str | None = None
    internet_plan_name: str | None = None
    internet_plan_price: float | None = None
    technician_id: int | None = None
    service_state: str | None = Field(
        default=None,
        description="Beyond the spec: active, suspended, cancelled, free or unknown (`estado`)",
    )


class VerifyRequest(RequestModel):
    """At least 3 of the 4 fields; null or empty values do not count."""

    name: str | None = None
    address: str | None = None
    internet_plan_name: str | None = None
    internet_plan_price: float | None = None


class VerificationDebug(BaseModel):
    client_address: str | None = None
    client_plan_name: str | None = None
    resolved_plan_price: float | None = None


class VerificationResult(BaseModel):
    is_valid: bool
    matched_fields: list[str]
    debug: VerificationDebug | None = None


class UpdateClientRequest(RequestModel):
    document: str | None = None
    phone: str | None = None
