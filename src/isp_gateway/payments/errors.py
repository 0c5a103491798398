"""The refusals and failures of the money routes (MONEY.md), each with its status, action and
a sentence a bot can say as is (the envelope's `message`, and an MCP tool's), from the
message catalogue (kit/messages/payments.py).

The 409s of a rule are `info` (MONEY.md 4); the rest are `error`. Reasons in `data.reason`
(promise_not_allowed, payment_report_not_allowed) and outcomes in `meta.outcome` (the 502s:
`unknown` when the backend may have acted, `not_made` when it did not) are the API's words.
"""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.kit.errors import ServiceError

# data.reason of promise_not_allowed and payment_report_not_allowed.
NOTHING_OWED = "nothing_owed"
SERVICE_CANCELLED = Action.SERVICE_CANCELLED  # the same word as diagnose's action
BROKEN_PROMISE = "broken_promise"
TOO_MANY_PROMISES = "too_many_promises"
TOO_MANY_REPORTS = "too_many_reports"  # of payment_report_not_allowed
# meta.outcome of a 502.
UNKNOWN = "unknown"
NOT_MADE = "not_made"


def spoken_date(day: date, today: date) -> str:
    """ "28 de noviembre" (with the year when it is not `today`'s), in the language of the
    request (kit/messages)."""
    return messages.day(day, today)


def spoken_money(amount: float) -> str:
    """ "$40.000" or "$92.500,50" (Spanish): the language's thousands and decimal marks."""
    return messages.amount(amount)


class PaymentError(ServiceError):
    """Every refusal of the money routes: its message is a catalogue sentence."""


class _Rule(PaymentError):
    """The refusal of a rule (MONEY.md 4: `info`, final for an idempotent repeat)."""

    status_code = 409
    type: Literal["success", "error", "info"] = "info"


class PromiseNotAllowed(_Rule):
    action = Action.PROMISE_NOT_ALLOWED

    def __init__(
        self,
        reason: str,
        variant: str,
        allowed_from: date | None = None,
        **params: Any,
    ) -> None:
        data: dict[str, Any] = {"reason": reason}
        if allowed_from is not None:
            data["allowed_from"] = allowed_from.isoformat()
        super().__init__(variant=variant, params=params, data=data)
        self.reason = reason


class PromiseAlreadyActive(_Rule):
    action = Action.PROMISE_ALREADY_ACTIVE

    def __init__(self, promise: dict[str, Any], today: date) -> None:
        until = spoken_date(date.fromisoformat(promise["until"]), today)
        super().__init__(variant="until", params={"day": until}, data=promise)


class PaymentReportDuplicate(_Rule):
    action = Action.PAYMENT_REPORT_DUPLICATE

    def __init__(self, earlier: dict[str, Any]) -> None:
        super().__init__(variant="review", data=earlier)


class PaymentReportNotAllowed(_Rule):
    action = Action.PAYMENT_REPORT_NOT_ALLOWED

    def __init__(self, allowed_from: date | None = None, today: date | None = None) -> None:
        if allowed_from is None or today is None:
            super().__init__(variant="nothing_owed", data={"reason": NOTHING_OWED})
            return
        super().__init__(
            variant="too_many",
            params={"day": spoken_date(allowed_from, today)},
            data={"reason": TOO_MANY_REPORTS, "allowed_from": allowed_from.isoformat()},
        )


class InvalidField(PaymentError):
    """422 `validation_error` naming one field of the body, in the shape of every malformed
    request's answer (`meta.errors`, the problem in the API's words), with the catalogue's
    sentence `variant` of `validation_error` as the message."""

    status_code = 422
    action = Action.VALIDATION_ERROR

    def __init__(self, field: str, problem: str, variant: str, **params: Any) -> None:
        path = f"body.{field}" if field else "body"  # "": the body as a whole
        super().__init__(
            variant=variant,
            params=params,
            meta={"errors": [{"field": path, "message": problem}]},
        )
        self.field = field


class InvoiceNotPending(PaymentError):
    status_code = 422
    action = Action.INVOICE_NOT_PENDING

    def __init__(self, invoice_id: int) -> None:
        super().__init__(
            variant="invoice", params={"invoice_id": invoice_id}, data={"invoice_id": invoice_id}
        )


class PaymentPromiseFailed(PaymentError):
    """502: the backend did not make the promise (`not_made`, safe to repeat) or may have
    (`unknown`: a repeat reconciles from the ledger and never sends a second promise)."""

    status_code = 502
    action = Action.PAYMENT_PROMISE_FAILED

    def __init__(self, outcome: str, *, retry_after: int | None = None, sent: bool = False) -> None:
        variant = "unknown" if outcome == UNKNOWN else "not_made"
        headers = {"Retry-After": str(retry_after)} if retry_after else None
        super().__init__(variant=variant, meta={"outcome": outcome}, headers=headers)
        # This request's promise went to the backend and may be made (the audit keeps it
        # one by one); not so a repeat still waiting on an earlier one's outcome.
        self.sent = sent


class PaymentReportFailed(PaymentError):
    """502: the backend did not take the report (`not_made`) or its answer was lost
    (`unknown`); either way the reference may be sent again (docs/payments.md)."""

    status_code = 502
    action = Action.PAYMENT_REPORT_FAILED

    def __init__(self, outcome: str, *, sent: bool = False) -> None:
        variant = "unknown" if outcome == UNKNOWN else ""
        super().__init__(variant=variant, meta={"outcome": outcome})
        self.sent = sent  # this request's report went to the backend and may be filed


class PaymentsBusy(PaymentError):
    """503: nothing was done (another promise of the service held its lock past the
    request's time, this worker is stopping, or too many receipts are being read)."""

    status_code = 503

    def __init__(self, action: str, reason: str, retry_after: int = 2) -> None:
        super().__init__(
            action=action,
            variant="busy",
            meta={"reason": reason},
            headers={"Retry-After": str(retry_after)},
        )


class UnsupportedReceipt(PaymentError):
    status_code = 415
    action = Action.UNSUPPORTED_RECEIPT

    def __init__(self) -> None:
        # The body is left unread: the connection closes after the answer.
        super().__init__(headers={"Connection": "close"})


class UploadTimedOut(PaymentError):
    """408: a report's body did not arrive within RECEIPT_UPLOAD_TIMEOUT_SECONDS. The rest
    is left unread: the connection closes after the answer."""

    status_code = 408
    action = Action.UPLOAD_TIMEOUT

    def __init__(self, seconds: float) -> None:
        shown = f"{seconds:g}"
        super().__init__(
            variant="seconds", params={"seconds": shown}, headers={"Connection": "close"}
        )


class ReceiptTooLarge(PaymentError):
    """The gateway's body-limit answer (web/limits.py), for a receipt over its own cap."""

    status_code = 413
    action = Action.PAYLOAD_TOO_LARGE

    def __init__(self, what: str, limit: int) -> None:
        # `what`: the catalogue's variant ("receipt", "report_fields").
        super().__init__(variant=what, params={"limit": limit}, headers={"Connection": "close"})
