"""HTTP routes for accounts (BEYOND.md): thin handlers over AccountService."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import Response

from isp_gateway.accounts.schemas import AccountResponse, PaymentMethodResponse
from isp_gateway.auth.dependencies import current_user
from isp_gateway.clients.schemas import SERVICE_ROUTE_ERRORS, ServiceIdPath
from isp_gateway.envelope import BackendResponse, error_responses, respond, success
from isp_gateway.runtime import RuntimeDep

# Under the spec's "Clients" tag: the explorer's tags are the spec's five.
router = APIRouter(prefix="/api/v1", tags=["Clients"], dependencies=[Depends(current_user)])


def _meta(stale: bool) -> dict[str, Any] | None:
    return {"stale": True} if stale else None


@router.get(
    "/clients/{service_id}/account",
    response_model=BackendResponse[AccountResponse],
    responses=SERVICE_ROUTE_ERRORS,
)
async def get_client_account(service_id: ServiceIdPath, runtime: RuntimeDep) -> Response:
    """What the customer owes (pending invoices, oldest due first) and the service state."""
    account = await runtime.accounts.account(service_id)
    # A Response skips FastAPI's re-validation of a dict built here; the model documents it.
    return respond(200, success("account_found", account.data, meta=_meta(account.stale)))


@router.get(
    "/payment-methods",
    response_model=BackendResponse[list[PaymentMethodResponse]],
    responses=error_responses(502, 503),
)
async def list_payment_methods(runtime: RuntimeDep) -> Response:
    """The ISP's payment methods (cached; `meta.stale` when served from an old copy)."""
    listing = await runtime.accounts.payment_methods()
    return respond(
        200, success("payment_methods_listed", listing.methods, meta=_meta(listing.stale))
    )
