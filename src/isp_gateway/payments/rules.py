"""The promise rules of MONEY.md 1, as pure functions of what the service has read: the date
window (1), the invoice chosen among the owed ones (3), and the ledger's rules (4, 5). No I/O
here: payments/service.py reads, locks and calls; diagnose asks `refusal` whether a promise
would be allowed without making one.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta
from typing import Any

from isp_gateway.payments.errors import (
    BROKEN_PROMISE,
    NOTHING_OWED,
    TOO_MANY_PROMISES,
    InvalidField,
    InvoiceNotPending,
    PaymentError,
    PromiseAlreadyActive,
    PromiseNotAllowed,
    spoken_date,
)
from isp_gateway.payments.ledger import MADE, WINDOW_DAYS, Promise


def check_until(until: date, today: date, max_days: int) -> None:
    """Rule 1: after today and at most `max_days` ahead (dates in TIMEZONE)."""
    last = today + timedelta(days=max_days)
    if not today < until <= last:
        raise InvalidField(
            "until",
            f"must be after {today.isoformat()} and at most {last.isoformat()} "
            f"({max_days} days ahead)",
            "promise_until",
            day=spoken_date(last, today),
        )


def check_paid_on(paid_on: date, today: date, days_back: int) -> None:
    """A payment report's date: not in the future, at most `days_back` days back."""
    first = today - timedelta(days=days_back)
    if not first <= paid_on <= today:
        raise InvalidField(
            "paid_on",
            f"must be from {first.isoformat()} to {today.isoformat()}",
            "paid_on",
            day=spoken_date(first, today),
        )


def choose_invoice(invoices: Sequence[dict[str, Any]], invoice_id: int | None) -> dict[str, Any]:
    """Rule 3's invoice: the one named, which must be owed by this service (422
    `invoice_not_pending`), else the oldest owed (`invoices` come oldest due first). The
    caller has refused an empty list already (nothing owed)."""
    if invoice_id is None:
        return invoices[0]
    for invoice in invoices:
        if invoice["invoice_id"] == invoice_id:
            return invoice
    raise InvoiceNotPending(invoice_id)


def nothing_owed() -> PromiseNotAllowed:
    return PromiseNotAllowed(NOTHING_OWED, "nothing_owed")


def refusal(
    promises: Sequence[Promise],
    owed: set[int],
    today: date,
    *,
    cooldown_days: int,
    per_90_days: int,
) -> PaymentError | None:
    """Rules 4 and 5 on the ledger's promises (made or not yet settled), or None when a
    new promise is allowed.

    4. an active promise (its date has not passed, its invoice still owed; a promise whose
       invoice was paid ended with the payment) → promise_already_active;
    5. a broken promise (its date passed, its invoice still owed) bars new ones for
       `cooldown_days` from its date → broken_promise + allowed_from; at most
       `per_90_days` promises made in any 90 days → too_many_promises + allowed_from
       (the day the oldest of them leaves the window)."""
    active = [p for p in promises if p.until >= today and p.invoice_id in owed]
    if active:
        newest = max(active, key=lambda p: (p.until, p.at))
        return PromiseAlreadyActive(newest.view(), today)
    broken = [p for p in promises if p.state == MADE and p.until < today and p.invoice_id in owed]
    if broken:
        allowed_from = max(p.until for p in broken) + timedelta(days=cooldown_days)
        if today < allowed_from:
            return PromiseNotAllowed(
                BROKEN_PROMISE, "broken", allowed_from, day=spoken_date(allowed_from, today)
            )
    first_day = today - timedelta(days=WINDOW_DAYS - 1)
    recent = sorted(p.created for p in promises if p.created >= first_day)
    if len(recent) >= per_90_days:
        # The window frees a place when the oldest promise that keeps it full leaves it.
        allowed_from = recent[len(recent) - per_90_days] + timedelta(days=WINDOW_DAYS)
        return PromiseNotAllowed(
            TOO_MANY_PROMISES,
            "too_many",
            allowed_from,
            count=len(recent),
            days=WINDOW_DAYS,
            day=spoken_date(allowed_from, today),
        )
    return None
