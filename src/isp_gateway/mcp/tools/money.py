"""The money tool (MONEY.md 3): `promise_payment`, the REST promise's one write path
(payments/service.py) with the same rules and outcomes, each a result with the catalogue's
sentence. A customer's receipt has no MCP tool: it is a file, sent by the bot's own upload
(POST /clients/{id}/payment-reports)."""

from __future__ import annotations

from datetime import date

from pydantic import Field

from isp_gateway.auth.keys import PAYMENTS_PROMISE
from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.mcp.tools.base import (
    Call,
    Outcome,
    ToolFailure,
    ToolSpec,
    Verified,
    verified_description,
)
from isp_gateway.payments.errors import NOTHING_OWED, SERVICE_CANCELLED, PaymentError
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


REFUSED_HINT = (
    "No promise was made: tell the customer, and offer the payment methods "
    "(list_payment_methods) instead; never insist or try another date to get around it."
)
# A refusal's reason that calls for another next step than the payment methods.
_REASON_HINTS: dict[str, str] = {
    NOTHING_OWED: (
        "No promise was made because nothing is owed: tell the customer; a service suspended "
        "with nothing owed needs a reconnection (a 'Reconexión' ticket, open_ticket), not a "
        "payment. Never insist or try another date."
    ),
    SERVICE_CANCELLED: (
        "No promise was made: the service is cancelled. Refer the customer to the office or "
        "sales; never insist or try another date."
    ),
}
# The next step for the agent after a refusal, by its action.
_HINTS: dict[str, str] = {
    Action.PROMISE_NOT_ALLOWED: REFUSED_HINT,
    Action.PROMISE_ALREADY_ACTIVE: (
        "A promise is already active: tell the customer its date; no new one is needed."
    ),
    Action.INVOICE_NOT_PENDING: (
        "That invoice is not owed: call again without invoice_id (the oldest owed), or check "
        "customer_account."
    ),
    Action.VALIDATION_ERROR: (
        "Agree another date with the customer within the window the sentence names, and call again."
    ),
    Action.PAYMENT_PROMISE_FAILED: (
        "The backend did not confirm it: calling again with the same arguments is safe (no "
        "second promise is made)."
    ),
}


async def promise_payment(call: Call, service_id: int, args: PromiseArgs) -> Outcome:
    try:
        until = date.fromisoformat(args.until)
    except ValueError:
        raise ToolFailure(
            "invalid_arguments",
            messages.say(Action.VALIDATION_ERROR, "promise_date"),
            "Pass until as YYYY-MM-DD.",
        ) from None
    payments = call.services.payments
    try:
        order = await payments.order_promise(service_id, until, args.invoice_id)
        answer = await payments.promise(order)
    except PaymentError as failed:
        # Each refusal's own sentence (the date window, the invoice, the backend).
        reason = failed.data.get("reason") if isinstance(failed.data, dict) else None
        extra = {"reason": reason} if reason else {}
        hint = _HINTS.get(failed.action)
        raise ToolFailure(failed.action, failed.message, hint, **extra) from None
    body = answer.body
    if body["action"] == Action.PAYMENT_PROMISE_CREATED:
        return Outcome({"outcome": body["action"], "promise": body["data"]}, body["message"])
    # A rule's refusal (a promise already active, or none allowed): an answer to relay.
    data = {"outcome": body["action"], **(body["data"] or {})}
    hint = _REASON_HINTS.get(str(data.get("reason")), _HINTS.get(body["action"]))
    return Outcome(data, body["message"], hint)


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "promise_payment",
        PAYMENTS_PROMISE,
        verified_description(
            "Reconnect the verified customer's service today against their promise to pay by "
            "`until`. Offer it ONLY to a customer whose service is suspended for debt "
            '(diagnose_connection answers service_suspended with next_step "promise") who '
            "asks for time to pay. Agree the date with the customer first, and say it back to "
            'them ("hasta el 28 de noviembre"); then read them the result\'s sentence, which '
            "repeats the date and the amount. It may answer that a promise is already active "
            "or that none is allowed now (a broken promise, too many promises: say so and "
            "offer the payment methods instead; nothing owed: a reconnection instead); never "
            "insist or try another date to get around it."
        ),
        PromiseArgs,
        read_only=False,
        on_service=promise_payment,
    ),
)
