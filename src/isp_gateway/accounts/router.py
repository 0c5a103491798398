"""HTTP routes for accounts (BEYOND.md): thin handlers over AccountService."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from fastapi.responses import Response

from isp_gateway.accounts.schemas import AccountResponse, PaymentMethodResponse
from isp_gateway.accounts.service import AccountService
from isp_gateway.auth.dependencies import Scoped
from isp_gateway.auth.keys import ACCOUNTS_READ
from isp_gateway.kit.actions import Action
from isp_gateway.web.deps import ServiceOf
from isp_gateway.web.envelope import BackendResponse, error_responses, respond, success
from isp_gateway.web.params import SERVICE_ROUTE_ERRORS_VERIFIED, VERIFIED, ServiceIdPath

# Under the spec's "Clients" tag: the explorer's tags are the spec's five.
AccountsDep = Annotated[AccountService, ServiceOf(AccountService)]

router = APIRouter(prefix="/api/v1", tags=["Clients"], dependencies=[Scoped(ACCOUNTS_READ)])


def _meta(stale: bool) -> dict[str, Any] | None:
    return {"stale": True} if stale else None


@router.get(
    "/clients/{service_id}/account",
    response_model=BackendResponse[AccountResponse],
    responses=SERVICE_ROUTE_ERRORS_VERIFIED,
    dependencies=[VERIFIED],
)
async def get_client_account(service_id: ServiceIdPath, accounts: AccountsDep) -> Response:
    """What the customer owes (pending invoices, oldest due first) and the service state."""
    account = await accounts.account(service_id)
    # A Response skips FastAPI's re-validation of a dict built here; the model documents it.
    return respond(200, success(Action.ACCOUNT_FOUND, account.data, meta=_meta(account.stale)))


@router.get(
    "/payment-methods",
    response_model=BackendResponse[list[PaymentMethodResponse]],
    responses=error_responses(502, 503),
)
async def list_payment_methods(accounts: AccountsDep) -> Response:
    """The ISP's payment methods (cached; `meta.stale` when served from an old copy)."""
    listing = await accounts.payment_methods()
    return respond(
        200, success(Action.PAYMENT_METHODS_LISTED, listing.methods, meta=_meta(listing.stale))
    )
