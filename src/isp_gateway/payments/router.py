"""HTTP routes for money (MONEY.md): thin handlers over PaymentService.

Both routes need their scope and, always, the service's `X-Verification-Id` (whatever
REQUIRE_VERIFICATION says): money never moves for a customer nobody verified. The report's
body is read by the service from the request's stream (payments/receipt.py), never through
`request.form()`, which would spool a receipt to disk; the body limit lets this one route's
body be as large as a receipt and the form around it (REPORT_ROUTE, app.py). A 422 FastAPI
gives before a handler runs (a promise's body, a header) is counted in the audit here, where
the route is known (MalformedCounted), as the service counts its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.requests import ClientDisconnect

from isp_gateway.accounts.schemas import ActivePromiseResponse
from isp_gateway.auth.dependencies import Scoped
from isp_gateway.auth.keys import PAYMENTS_PROMISE, PAYMENTS_REPORT
from isp_gateway.kit.actions import Action
from isp_gateway.kit.callers import current_caller
from isp_gateway.payments.errors import InvalidField
from isp_gateway.payments.schemas import (
    REPORT_BODY,
    PromiseCreatedResponse,
    PromiseRefusedResponse,
    PromiseRequest,
    ReportReceivedResponse,
    ReportRefusedResponse,
)
from isp_gateway.payments.service import PaymentService
from isp_gateway.web.deps import ServiceOf
from isp_gateway.web.envelope import BackendResponse, Responses, error_responses, render
from isp_gateway.web.params import (
    ALWAYS_VERIFIED,
    ALWAYS_VERIFIED_ERRORS,
    IdempotencyKey,
    ServiceIdPath,
    parse_service_id,
)

PaymentsDep = Annotated[PaymentService, ServiceOf(PaymentService)]

# Which money route a handler is, for its refusals counted here (MalformedCounted).
_ROUTES: dict[str, Literal["promise", "report"]] = {
    "promise_payment": "promise",
    "report_payment": "report",
}


def _field(exc: RequestValidationError) -> str:
    """The first field a 422 names, as the audit gives it: `until`, `header.Idempotency-Key`."""
    errors = exc.errors()
    loc = [str(part) for part in (errors[0].get("loc", ()) if errors else ())]
    return ".".join(loc[1:] if loc[:1] == ["body"] and len(loc) > 1 else loc) or "body"


class MalformedCounted(APIRoute):
    """A money route whose 422 for a malformed body or header, answered by FastAPI before
    the handler runs, is counted in the audit like the 422s the service decides itself
    (MONEY.md 3: a promise `refused`, a report `failed`; CALLERS.md 6: counted, never kept
    one by one). Only for a caller the route let in: a caller is resolved, so its credential,
    scope and verification passed (they are solved before the body's fields are checked). A
    body that is not JSON at all is refused before any of them: nobody is known to count."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()
        route = _ROUTES.get(self.name)
        if route is None:
            return handle

        async def counted(request: Request) -> Response:
            try:
                return await handle(request)
            except RequestValidationError as exc:
                if current_caller() is not None:
                    payments = request.app.state.runtime.services.of(PaymentService)
                    sid = parse_service_id(str(request.path_params["service_id"]))
                    payments.count_malformed(route, sid, _field(exc))
                raise

        return counted


# Under the spec's "Clients" tag, beside the account: the explorer's tags are the spec's five.
router = APIRouter(prefix="/api/v1/clients", tags=["Clients"], route_class=MalformedCounted)

# The report's path, for the body limit's wider cap (web/limits.py, set in app.py).
REPORT_ROUTE = re.compile(r"/api/v1/clients/[^/]+/payment-reports")

_UPSTREAM = [
    Action.UPSTREAM_UNAVAILABLE,
    Action.UPSTREAM_UNAUTHORIZED,
    Action.UPSTREAM_REFUSED_CLIENT_FETCH,
]


def _write_responses(
    failed: str, refused: list[str], model: type[BaseModel], more: dict[int, str], busy: str
) -> Responses:
    """The errors of a money write (`failed`: its failure's action): its rules' refusals
    (409, `refused`, answered in `model`), the statuses only it has (`more`), the upstream's
    failures, and the verification every money route needs. `busy`: the 503's `meta.reason`s
    besides the rate limit."""
    actions: dict[int, str | list[str]] = {
        400: Action.INVALID_SERVICE_ID,
        404: Action.CLIENT_NOT_FOUND,
        409: [*refused, Action.IDEMPOTENCY_KEY_IN_PROGRESS],
        **more,
        422: [Action.VALIDATION_ERROR, Action.INVOICE_NOT_PENDING, Action.IDEMPOTENCY_KEY_REUSED],
        502: [failed, *_UPSTREAM],
        503: [failed, Action.UPSTREAM_RATE_LIMITED],
    }
    responses = error_responses(*sorted(actions), actions=actions, models={409: model})
    responses[503]["description"] = (
        "Nothing was done; retry after `Retry-After`: `upstream_rate_limited`, or "
        f"`{failed}` with `meta.reason` {busy}."
    )
    return {**responses, **ALWAYS_VERIFIED_ERRORS}


_PROMISE_RESPONSES = _write_responses(
    Action.PAYMENT_PROMISE_FAILED,
    [Action.PROMISE_NOT_ALLOWED, Action.PROMISE_ALREADY_ACTIVE],
    BackendResponse[PromiseRefusedResponse | ActivePromiseResponse],
    {},
    "`service_busy` (another promise of the service) or `server_stopping`",
)
_PROMISE_RESPONSES[409]["description"] = (
    "`info`: a rule refused the promise. `promise_not_allowed` (`data.reason`: "
    "`service_cancelled`, `nothing_owed`, `broken_promise` or `too_many_promises`, the last "
    "two with `data.allowed_from`); `promise_already_active` (`data`: that promise); or "
    "`idempotency_key_in_progress`."
)
_PROMISE_RESPONSES[502]["description"] = (
    "`payment_promise_failed`: `meta.outcome` `unknown` (the backend may have made it; a "
    "repeat settles it and never makes a second) or `not_made`; `upstream_unavailable`: "
    "the owed invoices could not be read whole (no promise is made on a guess)."
)

_REPORT_RESPONSES = _write_responses(
    Action.PAYMENT_REPORT_FAILED,
    [Action.PAYMENT_REPORT_DUPLICATE, Action.PAYMENT_REPORT_NOT_ALLOWED],
    BackendResponse[ReportReceivedResponse | ReportRefusedResponse],
    {408: Action.UPLOAD_TIMEOUT, 413: Action.PAYLOAD_TOO_LARGE, 415: Action.UNSUPPORTED_RECEIPT},
    "`receipts_busy` or `server_stopping`",
)
_REPORT_RESPONSES[409]["description"] = (
    "`info`: `payment_report_duplicate` (the same reference for this service within 30 "
    "days; `data`: that report), `payment_report_not_allowed` (`data.reason`: "
    "`nothing_owed`, or `too_many_reports` with `data.allowed_from`: 5 a day per service), "
    "or `idempotency_key_in_progress`."
)
_REPORT_RESPONSES[408]["description"] = (
    "The body did not arrive whole within RECEIPT_UPLOAD_TIMEOUT_SECONDS (60 s) of the route "
    "starting to read it: nothing was done, the rest is not read and the connection closes. "
    "`action`: `upload_timeout`."
)
_REPORT_RESPONSES[413]["description"] = (
    "The receipt is larger than RECEIPT_MAX_BYTES, the text fields than 4 KiB, or the body "
    "than RECEIPT_MAX_BYTES + MAX_BODY_BYTES; the rest of the body is not read and the "
    "connection closes. `action`: `payload_too_large`."
)
_REPORT_RESPONSES[415]["description"] = (
    "The receipt is not a JPEG, PNG, WEBP or PDF by its content (its name and declared type "
    "are not read); the rest of the body is not read. `action`: `unsupported_receipt`."
)
_REPORT_RESPONSES[502]["description"] = (
    "`payment_report_failed`: `meta.outcome` `not_made` or `unknown` (its answer was lost; "
    "the same reference may be sent again); `upstream_unavailable`: the owed invoices could "
    "not be read whole."
)


@router.post(
    "/{service_id}/payment-promise",
    dependencies=[Scoped(PAYMENTS_PROMISE), ALWAYS_VERIFIED],
    status_code=201,
    response_model=BackendResponse[PromiseCreatedResponse],
    responses=_PROMISE_RESPONSES,
)
async def promise_payment(
    service_id: ServiceIdPath,
    body: PromiseRequest,
    payments: PaymentsDep,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """Reconnect a suspended service now against a promise to pay by `until` (MONEY.md 1)."""
    order = await payments.order_promise(parse_service_id(service_id), body.until, body.invoice_id)
    return render(await payments.promise(order, idempotency_key))


@router.post(
    "/{service_id}/payment-reports",
    dependencies=[Scoped(PAYMENTS_REPORT), ALWAYS_VERIFIED],
    status_code=202,
    response_model=BackendResponse[ReportReceivedResponse],
    responses=_REPORT_RESPONSES,
    openapi_extra={"requestBody": REPORT_BODY},
)
async def report_payment(
    request: Request,
    service_id: ServiceIdPath,
    payments: PaymentsDep,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """File a customer's payment report and receipt for the ISP's staff to review; it
    registers no money (MONEY.md 2)."""
    sid = parse_service_id(service_id)
    async with payments.receipt_slot():
        try:
            order = await payments.read_report(
                sid, request.headers.get("content-type"), request.stream()
            )
        except ClientDisconnect:
            # Nobody listens to this answer; it keeps the log free of a traceback.
            raise InvalidField("", "the body ended early", "interrupted") from None
        return render(await payments.report(order, idempotency_key))
