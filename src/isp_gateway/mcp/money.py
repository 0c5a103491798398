"""The MCP tool of money (MONEY.md 3): `promise_payment`, the REST promise's one write path
(payments/service.py) with the same rules and outcomes, each a result with its Spanish
sentence. A customer's receipt has no MCP tool: it is a file, sent by the bot's own upload
(POST /clients/{id}/payment-reports)."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field

from isp_gateway.auth.keys import PAYMENTS_PROMISE
from isp_gateway.kit.actions import Action
from isp_gateway.mcp.base import Call, Outcome, ToolFailure, ToolSpec, Verified, verified
from isp_gateway.payments.errors import PaymentError
from isp_gateway.payments.schemas import DAY_PATTERN, MAX_ID


class PromiseArgs(Verified):
    until: str = Field(
        pattern=DAY_PATTERN,
        description="YYYY-MM-DD: the day the customer says they will have paid by, after "
        "today and at most a few days ahead (PROMISE_MAX_DAYS, 5 by default)",
    )
    invoice_id: int | None = Field(
        default=None,
        ge=1,
        le=MAX_ID,
        description="A pending invoice of the customer (customer_account); default: the "
        "oldest pending one",
    )


async def promise_payment(call: Call, service_id: int, args: BaseModel) -> Outcome:
    assert isinstance(args, PromiseArgs)
    try:
        until = date.fromisoformat(args.until)
    except ValueError:
        raise ToolFailure("invalid_arguments", "La fecha no es válida; use AAAA-MM-DD.") from None
    payments = call.services.payments
    try:
        order = await payments.order_promise(service_id, until, args.invoice_id)
        answer = await payments.promise(order)
    except PaymentError as failed:
        # Each refusal's own sentence (the date window, the invoice, the backend).
        raise ToolFailure(failed.action, failed.message) from None
    body = answer.body
    if body["action"] == Action.PAYMENT_PROMISE_CREATED:
        return Outcome({"outcome": body["action"], "promise": body["data"]}, body["message"])
    # A rule's refusal (a promise already active, or none allowed): an answer to relay.
    return Outcome({"outcome": body["action"], **(body["data"] or {})}, body["message"])


PROMISE_PAYMENT = ToolSpec(
    "promise_payment",
    PAYMENTS_PROMISE,
    verified(
        "Reconnect the verified customer's service today against their promise to pay by "
        "`until`. Offer it ONLY to a customer whose service is suspended for debt "
        '(diagnose_connection answers service_suspended with next_step "promise") who asks '
        "for time to pay. Agree the date with the customer first, and say it back to them "
        '("hasta el 28 de noviembre"); then read them the result\'s sentence, which repeats '
        "the date and the amount. It may answer that a promise is already active or that "
        "none is allowed now (a broken promise, too many promises, nothing owed): say so and "
        "offer the payment methods instead; never insist or try another date to get around it."
    ),
    PromiseArgs,
    read_only=False,
    on_service_args=promise_payment,
)
