"""Money conversations (MONEY.md): payment promises and payment reports, one write path each
for REST and MCP.

A promise: `order_promise` checks rule 1 (the date window) and fingerprints the request;
`promise(order, key)` runs rules 2-6 (payments/promising.py) through the store's idempotency
(kit/idempotency.py) and answers the decided answer (kit/answers.py): 201 with the promise,
or a final refusal of a rule (409 `info`), replayed as it was for a repeat with the key.
A report: `read_report` reads the multipart body as it arrives (payments/receipt.py) and
checks its fields; `report(order, key)` files it (payments/reporting.py) the same way: 202,
or a final refusal. Other refusals raise typed errors (payments/errors.py).

Each outcome is audited here, where it is decided (CALLERS.md 4): `payment_promise`
(`created`, `refused` + reason, `failed`) and `payment_report` (`received`, `duplicate`,
`failed`); the details hold ids, amounts and the reference masked like a document, never a
date (the audit would read it as a phone) nor a receipt. An idempotent replay is no new
outcome: not audited.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable
from contextlib import AbstractAsyncContextManager
from datetime import date
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from isp_gateway.kit import deadline, messages
from isp_gateway.kit.actions import Action
from isp_gateway.kit.answers import Answer, success
from isp_gateway.kit.errors import ServiceError, StoreUnavailable
from isp_gateway.kit.idempotency import Idempotency, fingerprint, refusal_told
from isp_gateway.payments.errors import (
    InvalidField,
    PaymentPromiseFailed,
    PaymentReportDuplicate,
    PaymentReportFailed,
    PaymentReportNotAllowed,
    PromiseAlreadyActive,
    PromiseNotAllowed,
    UploadTimedOut,
    spoken_date,
    spoken_money,
)
from isp_gateway.payments.ledger import PromiseLedger, ReportMarks
from isp_gateway.payments.promising import Made, PromiseMaker, PromiseOrder
from isp_gateway.payments.receipt import read_report_form
from isp_gateway.payments.reporting import ReportFiler, ReportOrder
from isp_gateway.payments.rules import check_paid_on, check_until, refusal
from isp_gateway.payments.schemas import ReportFields
from isp_gateway.payments.slots import ReceiptSlots

if TYPE_CHECKING:
    from isp_gateway.accounts.service import AccountService
    from isp_gateway.clients.service import ClientService
    from isp_gateway.parts import Parts

# A report's `paid_on`: at most this many days back (MONEY.md 2).
PAID_ON_DAYS_BACK = 60

PROMISE_FINAL = (PromiseNotAllowed, PromiseAlreadyActive)
REPORT_FINAL = (PaymentReportDuplicate, PaymentReportNotAllowed)


class PaymentService:
    def __init__(
        self,
        parts: Parts,
        *,
        clients: ClientService,
        accounts: AccountService,
        ledger: PromiseLedger,
    ) -> None:
        settings, store = parts.settings, parts.store
        self.settings, self.audit, self.ledger = settings, parts.audit, ledger
        self.maker = PromiseMaker(parts, ledger=ledger, clients=clients, accounts=accounts)
        self.filer = ReportFiler(
            parts, marks=ReportMarks(store), clients=clients, accounts=accounts
        )
        timeout = settings.UPSTREAM_TIMEOUT_SECONDS
        ttl = settings.IDEMPOTENCY_TTL_SECONDS
        # A repeat with the key waits for the first, whose locked step it outlives.
        self.promise_keys = Idempotency(
            store,
            "payments:promise",
            ttl=ttl,
            lock_seconds=self.maker.lock_seconds + self.maker.lock_wait + 5,
            wait_seconds=max(5.0, timeout),
        )
        self.report_keys = Idempotency(
            store,
            "payments:report",
            ttl=ttl,
            lock_seconds=3 * timeout + 5,
            wait_seconds=max(5.0, timeout),
        )
        self.receipts = ReceiptSlots()

    # -- promises ------------------------------------------------------------------------

    async def order_promise(
        self, service_id: int, until: date, invoice_id: int | None
    ) -> PromiseOrder:
        """Rule 1 (the date window, in TIMEZONE: 422 naming `until`, audited as refused),
        before anything is read; the order with its fingerprint."""
        today = self.ledger.today()
        try:
            check_until(until, today, self.settings.PROMISE_MAX_DAYS)
        except InvalidField:
            details = {"reason": "until_out_of_range", "days_ahead": (until - today).days}
            await self._event("payment_promise", "refused", service_id, details, asked=False)
            raise
        request = {"service_id": service_id, "until": until.isoformat(), "invoice_id": invoice_id}
        return PromiseOrder(service_id, until, invoice_id, fingerprint(request))

    def count_malformed(
        self, route: Literal["promise", "report"], service_id: int, field: str
    ) -> None:
        """A money request of a verified caller that the route refused before it ran: 422
        `validation_error` for a body or header not as documented (`field`, e.g. `until`).
        Counted as the route's own 422s are (a promise `refused`, a report `failed`, reason
        `validation_error`): nothing was done."""
        if route == "promise":
            event, outcome = "payment_promise", "refused"
        else:
            event, outcome = "payment_report", "failed"
        details = {"reason": Action.VALIDATION_ERROR.value, "field": field}
        self.audit.count_about(event, outcome, service_id, details)

    async def promise(self, order: PromiseOrder, idempotency_key: str | None = None) -> Answer:
        """Make the promise: 201 `payment_promise_created`, or a final refusal of a rule as
        its answer; other refusals raise. With `idempotency_key`, a repeat gets the first
        final answer as it was."""

        async def produce() -> Answer:
            refused = partial(self._promise_refused, order)
            made = await refusal_told(self.maker.make(order), refused)
            details = {
                "invoice_id": made.promise.invoice_id,
                "days_ahead": (made.promise.until - made.promise.created).days,
                "amount_due": made.amount_due,
                "reconciled": made.reconciled,
            }
            await self._event("payment_promise", "created", order.service_id, details)
            return Answer(201, self._created(order.service_id, made))

        return await self.promise_keys.run(
            idempotency_key, order.fingerprint, produce, final=PROMISE_FINAL
        )

    def _created(self, service_id: int, made: Made) -> dict[str, Any]:
        promise, today = made.promise, self.ledger.today()
        message = messages.say(
            Action.PAYMENT_PROMISE_CREATED,
            "reactivated" if made.was_suspended else "kept",
            until=spoken_date(promise.until, today),
            amount=spoken_money(made.amount_due),
        )
        data = {
            "service_id": service_id,
            "invoice_id": promise.invoice_id,
            "until": promise.until.isoformat(),
            "amount_due": made.amount_due,
            "reconnected": True,
        }
        return success(Action.PAYMENT_PROMISE_CREATED, data, message=message)

    async def _promise_refused(self, order: PromiseOrder, exc: ServiceError) -> None:
        if isinstance(exc, StoreUnavailable):
            return  # the audit lives in the store too: the 503 says it all
        details: dict[str, Any] = {"invoice_id": order.invoice_id}
        if exc.status_code >= 500:
            meta = exc.meta or {}
            details["reason"] = exc.action
            details["outcome"] = meta.get("outcome") or meta.get("reason")
            asked = isinstance(exc, PaymentPromiseFailed) and exc.sent
            await self._event("payment_promise", "failed", order.service_id, details, asked=asked)
            return
        details["reason"] = (
            (exc.data or {}).get("reason") if isinstance(exc, PromiseNotAllowed) else exc.action
        )
        await self._event("payment_promise", "refused", order.service_id, details, asked=False)

    async def promise_allowed(self, service_id: int, invoices: list[dict[str, Any]]) -> bool:
        """Whether rules 4 and 5 would let a suspended service that owes `invoices` promise
        now (diagnose's `next_step: "promise"`). Reads the ledger only: an unconfirmed
        promise counts as made (it is settled when a promise is asked, not here)."""
        if not invoices:
            return False
        refused = refusal(
            await self.ledger.read(service_id),
            {int(i["invoice_id"]) for i in invoices},
            self.ledger.today(),
            cooldown_days=self.settings.PROMISE_COOLDOWN_DAYS,
            per_90_days=self.settings.PROMISES_PER_90_DAYS,
        )
        return refused is None

    # -- reports -------------------------------------------------------------------------

    def receipt_slot(self) -> AbstractAsyncContextManager[None]:
        """Room to hold one receipt in this worker's memory, within the caller's part of it,
        or 503 `receipts_busy` at once (payments/slots.py)."""
        return self.receipts.taken()

    async def read_report(
        self, service_id: int, content_type: str | None, body: AsyncIterable[bytes]
    ) -> ReportOrder:
        """The report's body read and checked (422, 413, 415 as soon as known, 408 past
        RECEIPT_UPLOAD_TIMEOUT_SECONDS, audited as `failed`): its order, with the
        fingerprint of its fields and its receipt."""
        seconds = self.settings.RECEIPT_UPLOAD_TIMEOUT_SECONDS
        try:
            try:
                # The whole body, not each read: an upload that trickles a byte at a time
                # holds its slot no longer than one that stalls.
                async with asyncio.timeout(seconds):
                    form = await read_report_form(
                        content_type, body, max_receipt=self.settings.RECEIPT_MAX_BYTES
                    )
            except TimeoutError:
                raise UploadTimedOut(seconds) from None
            # The time the customer's connection took is not the backend's: the checks and
            # the upstream call get the request's whole deadline from the body's last byte.
            deadline.restart()
            fields = ReportFields.of(form.fields)
            if form.receipt is None:
                raise InvalidField("receipt", "required", "receipt_required")
            check_paid_on(fields.paid_on, self.ledger.today(), PAID_ON_DAYS_BACK)
        except ServiceError as exc:
            details = {"reason": exc.action, "field": getattr(exc, "field", None)}
            await self._event("payment_report", "failed", service_id, details, asked=False)
            raise
        receipt = form.receipt
        request = {
            "service_id": service_id,
            "reference": fields.reference,
            "paid_on": fields.paid_on.isoformat(),
            "payment_method_id": fields.payment_method_id,
            "amount": fields.amount,
            "invoice_id": fields.invoice_id,
            "receipt": receipt.digest(),
        }
        return ReportOrder(service_id, fields, receipt, fingerprint(request))

    async def report(self, order: ReportOrder, idempotency_key: str | None = None) -> Answer:
        """File the report for staff review: 202 `payment_report_received`, or a final
        refusal (the duplicate, nothing owed) as its answer; other refusals raise."""

        async def produce() -> Answer:
            refused = partial(self._report_refused, order)
            data = await refusal_told(self.filer.file(order), refused)
            details = {**self._of(order), "invoice_id": data["invoice_id"]}
            await self._event("payment_report", "received", order.service_id, details)
            fields = order.fields
            message = messages.say(
                Action.PAYMENT_REPORT_RECEIVED, "amount", amount=spoken_money(fields.amount)
            )
            return Answer(202, success(Action.PAYMENT_REPORT_RECEIVED, data, message=message))

        return await self.report_keys.run(
            idempotency_key, order.fingerprint, produce, final=REPORT_FINAL
        )

    @staticmethod
    def _of(order: ReportOrder) -> dict[str, Any]:
        fields, receipt = order.fields, order.receipt
        return {
            "invoice_id": fields.invoice_id,
            # Masked by the audit like a document ("***" and its last two digits).
            "reference": fields.reference,
            "amount": fields.amount,
            "payment_method_id": fields.payment_method_id,
            "receipt_type": receipt.kind.name,
            "receipt_bytes": receipt.size,
        }

    async def _report_refused(self, order: ReportOrder, exc: ServiceError) -> None:
        if isinstance(exc, StoreUnavailable):
            return
        details = self._of(order)
        if isinstance(exc, PaymentReportDuplicate):
            details["invoice_id"] = (exc.data or {}).get("invoice_id")
            await self._event("payment_report", "duplicate", order.service_id, details, asked=False)
            return
        details["reason"] = (exc.data or {}).get("reason") or exc.action
        details["outcome"] = (exc.meta or {}).get("outcome")
        asked = isinstance(exc, PaymentReportFailed) and exc.sent  # it may be filed
        await self._event("payment_report", "failed", order.service_id, details, asked=asked)

    async def _event(
        self,
        event: str,
        outcome: str,
        service_id: int,
        details: dict[str, Any],
        *,
        asked: bool = True,
    ) -> None:
        """One outcome in the audit. `asked`: this request had the backend do it (done, or
        sent and its answer lost, so it may be done): one by one in the writes' stream.
        Otherwise nothing was done (a rule, a field, the duplicate, the budget, a backend
        that refused or was not reached, a repeat waiting on an earlier outcome): counted as
        every refusal is, one event a caller, outcome, service, reason and minute
        (CALLERS.md 6), so a loop of them never pushes the writes out of the audit."""
        if asked:
            await self.audit.record(event, outcome, service_id=service_id, details=details)
            return
        self.audit.count_about(event, outcome, service_id, details)
