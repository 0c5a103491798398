"""Making a payment promise (MONEY.md 1, rules 2-6): the reads, the service's lock, the
ledger and the one upstream call. payments/service.py wraps it with the order (rule 1), the
idempotency, the audit and the answer.

Rules 2 and 3 are read outside the lock (the record, the owed invoices, read whole: a list
that cannot be confirmed, or only a stale copy of it, answers 502 and no promise is made on
a guess). Rules 4 and 5, the upstream call and the ledger's write run under one lock per
service in the store, so two requests for one service, on any workers, make one promise.

A promise is written to the ledger as `unconfirmed` before it is sent, and as `made` once
the backend confirms it. When the answer is lost (a timeout, garbage, a 5xx, an empty body)
the entry stays unconfirmed and counts as a promise; the next promise request of the service
settles it before anything else, without sending a second one: a promise (accion 1)
reactivates a suspended service at once, so a fresh read of the service's state tells. Not
suspended any more: it was made. Still suspended SETTLE_TIMEOUTS upstream timeouts after it
was sent (a slow backend may still carry out a request its caller gave up on): it was not,
and it is dropped. Sooner: still unknown (502, Retry-After). A promise asked for a service
that was not suspended cannot be told apart this way and counts as made.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from isp_gateway.accounts.service import balance_unconfirmed
from isp_gateway.kit import deadline
from isp_gateway.kit.actions import Action
from isp_gateway.kit.callers import current_caller
from isp_gateway.kit.errors import NotFound, StoreUnavailable, UpstreamError
from isp_gateway.kit.storage import LockTimeout
from isp_gateway.payments.errors import (
    NOT_MADE,
    SERVICE_CANCELLED,
    UNKNOWN,
    PaymentPromiseFailed,
    PaymentsBusy,
    PromiseNotAllowed,
)
from isp_gateway.payments.ledger import MADE, UNCONFIRMED, Promise, PromiseLedger
from isp_gateway.payments.rules import choose_invoice, nothing_owed, refusal
from isp_gateway.upstream.gateway import UpstreamUnreached
from isp_gateway.upstream.payments import (
    InvoiceAlreadyPaid,
    PaymentOutcomeUnknown,
    PaymentRejected,
    create_promise,
)

if TYPE_CHECKING:
    from datetime import date

    from isp_gateway.accounts.service import AccountService
    from isp_gateway.clients.service import ClientService
    from isp_gateway.parts import Parts
    from isp_gateway.upstream.clients import ClientRecord

log = logging.getLogger("isp_gateway.payments")

SUSPENDED = "suspended"
CANCELLED = "cancelled"
# An unconfirmed promise of a service still suspended this many upstream timeouts after it
# was sent was not made (a backend's worker is killed by then: gunicorn's default 30 s).
SETTLE_TIMEOUTS = 3
# Of the answer's 2 s margin past the deadline, what the promise's POST may use.
POST_MARGIN_SECONDS = 1.0


def time_left(seconds: float) -> float:
    """`seconds`, or less: what the request's deadline leaves (never below nothing)."""
    current = deadline.current()
    return seconds if current is None else max(0.0, min(seconds, current.left()))


async def read_owed(accounts: AccountService, record: ClientRecord) -> list[dict[str, Any]]:
    """Rule 3's read: the service's owed invoices, oldest due first, read whole. A list that
    cannot be confirmed raises 502 `upstream_unavailable`; a stale copy (served because the
    backend failed) does too: money is never moved on an old list."""
    invoices, _, stale = await accounts.pending_of(record["username"])
    if stale:
        raise balance_unconfirmed()
    return invoices


@dataclass(frozen=True, slots=True)
class PromiseOrder:
    """A promise request that passed rule 1, with its fingerprint (its idempotency, and how
    a repeat of it is recognised in the ledger)."""

    service_id: int
    until: date
    invoice_id: int | None
    fingerprint: str


@dataclass(frozen=True, slots=True)
class Made:
    """A promise made (or found made by a repeat), and what its answer says."""

    promise: Promise
    amount_due: float
    was_suspended: bool
    reconciled: bool = False


class PromiseMaker:
    def __init__(
        self,
        parts: Parts,
        *,
        ledger: PromiseLedger,
        clients: ClientService,
        accounts: AccountService,
    ) -> None:
        settings = self.settings = parts.settings
        self.gateway, self.stopping, self.ledger = parts.gateway, parts.stopping, ledger
        self.clients, self.accounts = clients, accounts
        timeout = settings.UPSTREAM_TIMEOUT_SECONDS
        # A holder reads the state once and posts once: the lock outlives that, yet frees
        # the service if a worker dies holding it.
        self.lock_seconds = 3 * timeout + 5
        # A request waits for another promise of its service about as long as that one's
        # call may take, within its own deadline; past it, 503 and nothing done.
        self.lock_wait = timeout + 1
        self.settle_seconds = SETTLE_TIMEOUTS * timeout

    async def make(self, order: PromiseOrder) -> Made:
        """Rules 2-6 for `order` (rule 1 was checked when it was ordered)."""
        service_id = order.service_id
        record, _ = await self.clients.confirmed_record(service_id)
        state = record["client"]["service_state"]
        if state == CANCELLED:
            raise PromiseNotAllowed(SERVICE_CANCELLED, "cancelled")
        invoices = await read_owed(self.accounts, record)
        if not invoices:
            raise nothing_owed()
        invoice = choose_invoice(invoices, order.invoice_id)
        try:
            async with self.ledger.lock(
                service_id, timeout=self.lock_seconds, wait=time_left(self.lock_wait)
            ):
                return await self._locked(order, record, invoices, invoice)
        except LockTimeout:
            raise PaymentsBusy(Action.PAYMENT_PROMISE_FAILED, "service_busy") from None

    async def _locked(
        self,
        order: PromiseOrder,
        record: ClientRecord,
        invoices: list[dict[str, Any]],
        invoice: dict[str, Any],
    ) -> Made:
        service_id = order.service_id
        today = self.ledger.today()
        totals = {i["invoice_id"]: float(i["total"]) for i in invoices}
        promises, settled = await self.settle(service_id, await self.ledger.read(service_id))
        mine = next((p for p in settled if p.fingerprint == order.fingerprint), None)
        if mine is not None:
            # A repeat of a request whose answer was lost: that promise, not a second one.
            amount = totals.get(mine.invoice_id, float(invoice["total"]))
            return Made(mine, amount, mine.suspended, reconciled=True)
        refused = refusal(
            promises,
            set(totals),
            today,
            cooldown_days=self.settings.PROMISE_COOLDOWN_DAYS,
            per_90_days=self.settings.PROMISES_PER_90_DAYS,
        )
        if refused is not None:
            raise refused
        if self.stopping.is_set():
            # The last moment nothing has reached the upstream (as a ticket's creation).
            raise PaymentsBusy(Action.PAYMENT_PROMISE_FAILED, "server_stopping", retry_after=1)
        caller = current_caller()
        entry = Promise(
            invoice_id=int(invoice["invoice_id"]),
            until=order.until,
            created=today,
            at=time.time(),
            caller=caller.caller if caller else None,
            end_user=caller.end_user if caller else None,
            state=UNCONFIRMED,
            suspended=record["client"]["service_state"] == SUSPENDED,
            fingerprint=order.fingerprint,
        )
        # Before the call: a lost answer still counts (and blocks a second promise).
        await self.ledger.write(service_id, [*promises, entry])
        await self._send(service_id, entry, promises)
        made = entry.confirmed()
        await self.ledger.write(service_id, [*promises, made])
        if entry.suspended:
            await self._reactivated(record)
        return Made(made, float(invoice["total"]), entry.suspended)

    async def _send(self, service_id: int, entry: Promise, before: list[Promise]) -> None:
        """The upstream call; a refusal takes the entry out again (nothing was made)."""
        timeout = time_left(self.settings.UPSTREAM_TIMEOUT_SECONDS) + POST_MARGIN_SECONDS
        try:
            await create_promise(self.gateway, entry.invoice_id, entry.until, timeout=timeout)
        except PaymentOutcomeUnknown:
            log.warning("payment promise for service %d: outcome unknown", service_id)
            raise PaymentPromiseFailed(UNKNOWN, sent=True) from None
        except InvoiceAlreadyPaid:
            await self.ledger.write(service_id, before)
            raise nothing_owed() from None
        except (PaymentRejected, UpstreamUnreached) as exc:
            log.warning(
                "payment promise for service %d not made (%s)", service_id, type(exc).__name__
            )
            await self.ledger.write(service_id, before)
            raise PaymentPromiseFailed(NOT_MADE) from None
        except UpstreamError:
            # Our key refused, the backend's rate limit: refused before anything was done.
            await self.ledger.write(service_id, before)
            raise

    async def settle(
        self, service_id: int, promises: list[Promise]
    ) -> tuple[list[Promise], list[Promise]]:
        """The ledger's promises with every unconfirmed one settled (module docstring), and
        those found made now. Raises 502 `payment_promise_failed` (outcome unknown) while one
        cannot be settled yet."""
        pending = [p for p in promises if p.state == UNCONFIRMED]
        if not pending:
            return promises, []
        state = None
        fresh: ClientRecord | None = None
        if any(p.suspended for p in pending):
            fresh = await self._fresh_record(service_id)
            state = fresh["client"]["service_state"]
        kept: list[Promise] = []
        settled: list[Promise] = []
        waiting = 0.0
        now = time.time()
        for promise in promises:
            if promise.state == MADE:
                kept.append(promise)
            elif not promise.suspended or state != SUSPENDED:
                kept.append(promise.confirmed())
                settled.append(kept[-1])
                log.info("payment promise for service %d: an unconfirmed one was made", service_id)
            elif now - promise.at >= self.settle_seconds:
                log.info(
                    "payment promise for service %d: an unconfirmed one was not made", service_id
                )
            else:
                kept.append(promise)
                waiting = max(waiting, self.settle_seconds - (now - promise.at))
        if kept != promises:
            await self.ledger.write(service_id, kept)
        if waiting:
            raise PaymentPromiseFailed(UNKNOWN, retry_after=max(1, math.ceil(waiting)))
        if settled and fresh is not None and state != SUSPENDED:
            await self.clients.remember(fresh)
        return kept, settled

    async def _fresh_record(self, service_id: int) -> ClientRecord:
        try:
            rows = await self.clients.misses.query("service_id", str(service_id))
        except UpstreamError:
            # The earlier promise's outcome stays unknown: nothing new is sent.
            raise PaymentPromiseFailed(UNKNOWN, retry_after=2) from None
        fresh = next((r for r in rows if r["client"]["service_id"] == service_id), None)
        if fresh is None:
            raise NotFound(
                action=Action.CLIENT_NOT_FOUND, variant="service", params={"service_id": service_id}
            )
        return fresh

    async def _reactivated(self, record: ClientRecord) -> None:
        """The backend reactivated the service with the promise (accion 1, UPSTREAM.md): the
        cached record says so at once, on every worker, with no upstream read."""
        client = dict(record["client"])
        client["service_state"] = "active"
        client["payment_status"] = self.settings.ACTIVE_CLIENT_STATES[0]
        patched: Any = {**record, "client": client}
        try:
            await self.clients.remember(patched)
        except StoreUnavailable:
            log.warning(
                "service %d: reactivation not recorded in the cache", record["client"]["service_id"]
            )
