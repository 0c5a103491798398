"""Filing a payment report (MONEY.md 2): the checks against the account, the duplicate guard
and the one upstream call that hands the receipt to the ISP's staff. It never registers
money: the invoice goes to "En revisión" until staff accept or reject it in WispHub.
payments/service.py wraps it with the idempotency, the audit and the answer.

Checked in this order, nothing sent until all pass: the service exists; its owed invoices,
read whole (502 unless confirmed); something is owed (409 `payment_report_not_allowed`); the
invoice named is one of them (422 `invoice_not_pending`); the payment method is one of the
ISP's (422); the reference is new for the service in 30 days (409
`payment_report_duplicate`, claimed atomically in the store: of two at once, one passes);
and at most REPORTS_PER_DAY reports of the service that day (409 `payment_report_not_allowed`,
reason `too_many_reports`).

A report the backend did not take (refused, or never sent) frees its reference again. So does
one whose answer was lost: staff reviewing the same reference twice is a small cost, a
customer's payment never reviewed because a retry was refused is not (docs/payments.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from isp_gateway.kit.actions import Action
from isp_gateway.kit.callers import current_caller
from isp_gateway.payments.errors import (
    NOT_MADE,
    UNKNOWN,
    InvalidField,
    PaymentReportDuplicate,
    PaymentReportFailed,
    PaymentReportNotAllowed,
    PaymentsBusy,
)
from isp_gateway.payments.ledger import REPORTS_PER_DAY, ReportMarks
from isp_gateway.payments.promising import POST_MARGIN_SECONDS, read_owed, time_left
from isp_gateway.payments.rules import choose_invoice
from isp_gateway.upstream.gateway import UpstreamUnreached
from isp_gateway.upstream.payments import (
    InvoiceAlreadyPaid,
    PaymentOutcomeUnknown,
    PaymentRejected,
    ReceiptSizeMismatch,
    report_payment,
)

if TYPE_CHECKING:
    from isp_gateway.accounts.service import AccountService
    from isp_gateway.clients.service import ClientService
    from isp_gateway.parts import Parts
    from isp_gateway.payments.receipt import Receipt
    from isp_gateway.payments.schemas import ReportFields

log = logging.getLogger("isp_gateway.payments")

IN_REVIEW = "in_review"


@dataclass(frozen=True, slots=True)
class ReportOrder:
    """A report whose form passed its checks: the fields, the receipt (in memory) and the
    fingerprint of both (an idempotent repeat must send the same file)."""

    service_id: int
    fields: ReportFields
    receipt: Receipt
    fingerprint: str


class ReportFiler:
    def __init__(
        self,
        parts: Parts,
        *,
        marks: ReportMarks,
        clients: ClientService,
        accounts: AccountService,
    ) -> None:
        self.settings, self.gateway, self.stopping = parts.settings, parts.gateway, parts.stopping
        self.clients, self.accounts, self.marks = clients, accounts, marks

    async def file(self, order: ReportOrder) -> dict[str, Any]:
        """The report filed for staff review: its answer's data, or a refusal."""
        service_id, fields = order.service_id, order.fields
        record, _ = await self.clients.confirmed_record(service_id)
        invoices = await read_owed(self.accounts, record)
        if not invoices:
            raise PaymentReportNotAllowed()
        invoice_id = int(choose_invoice(invoices, fields.invoice_id)["invoice_id"])
        methods = await self.accounts.payment_methods()
        if fields.payment_method_id not in {method["id"] for method in methods.methods}:
            raise InvalidField(
                "payment_method_id",
                "not one of GET /api/v1/payment-methods",
                "payment_method",
            )
        caller = current_caller()
        mark = {
            "invoice_id": invoice_id,
            "amount": fields.amount,
            "payment_method_id": fields.payment_method_id,
            "caller": caller.caller if caller else None,
            "end_user": caller.end_user if caller else None,
        }
        data = {
            "service_id": service_id,
            "invoice_id": invoice_id,
            "reference": fields.reference,
            "status": IN_REVIEW,
        }
        if not await self.marks.claim(service_id, fields.reference, mark):
            earlier = await self.marks.earlier(service_id, fields.reference) or {}
            raise PaymentReportDuplicate(
                {**data, "invoice_id": earlier.get("invoice_id", invoice_id)}
            )
        today = datetime.now(self.settings.tz).date()
        try:
            # Counted before it is sent (atomic, so reports at once cannot all pass), and
            # taken back when it does not reach staff.
            if await self.marks.count(service_id, today) > REPORTS_PER_DAY:
                raise PaymentReportNotAllowed(today + timedelta(days=1), today)
            try:
                await self._send(order, invoice_id)
            except BaseException:
                await self.marks.count(service_id, today, -1)
                raise
        except BaseException:
            await self.marks.release(service_id, fields.reference)
            raise
        return data

    async def _send(self, order: ReportOrder, invoice_id: int) -> None:
        if self.stopping.is_set():
            raise PaymentsBusy(Action.PAYMENT_REPORT_FAILED, "server_stopping", retry_after=1)
        fields, receipt = order.fields, order.receipt
        timeout = time_left(self.settings.UPSTREAM_TIMEOUT_SECONDS) + POST_MARGIN_SECONDS
        try:
            await report_payment(
                self.gateway,
                invoice_id,
                fields.payment_method_id,
                fields.paid_on,
                fields.reference,
                receipt.chunks(),
                # Named by what it is (its content), not by the customer's file name.
                f"comprobante.{receipt.kind.name}",
                receipt.kind.media_type,
                size=receipt.size,
                timeout=timeout,
            )
        except PaymentOutcomeUnknown:
            log.warning("payment report for service %d: outcome unknown", order.service_id)
            raise PaymentReportFailed(UNKNOWN, sent=True) from None
        except InvoiceAlreadyPaid:
            raise PaymentReportNotAllowed() from None
        except (PaymentRejected, UpstreamUnreached, ReceiptSizeMismatch) as exc:
            log.warning(
                "payment report for service %d not filed (%s)",
                order.service_id,
                type(exc).__name__,
            )
            raise PaymentReportFailed(NOT_MADE) from None
