"""The gateway's own ledgers of money (MONEY.md 1-2), in the store: shared by every worker
and, with Redis, surviving a restart of any of them.

WispHub cannot list promises (its route is create-only), so every promise made through the
gateway is written here, per service: its invoice, date, the day it was made, who asked,
and whether the backend confirmed it (`made`) or its answer was lost (`unconfirmed`: written
before the call, so a lost answer still counts). The promise rules read it (payments/
rules.py); the account and diagnose show its active promise (kit/promises.py).

Payment reports leave one mark per (service, reference) for 30 days, the duplicate guard,
and a count per service and day, the daily cap.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from isp_gateway.kit.promises import OwedInvoices

if TYPE_CHECKING:
    from contextlib import AbstractAsyncContextManager

    from isp_gateway.kit.storage import Store
    from isp_gateway.settings import Settings

MADE = "made"
UNCONFIRMED = "unconfirmed"
# Rule 5's window (MONEY.md 1: "in any 90 days").
WINDOW_DAYS = 90
# A report's reference is a duplicate for this long (MONEY.md 2).
REPORT_DAYS = 30
# Reports one service may file in a day (TIMEZONE's): staff review each by hand, and a
# customer with several invoices and partial payments files a few at most.
REPORTS_PER_DAY = 5
DAY_SECONDS = 86_400
# What the duplicate guard ignores in a reference besides spaces (reference_key).
_IGNORED = frozenset(".-_/")


@dataclass(frozen=True, slots=True)
class Promise:
    """One promise of the ledger (dates in TIMEZONE)."""

    invoice_id: int
    until: date
    created: date
    at: float  # when it was asked (epoch seconds): how old an unconfirmed one is
    caller: str | None
    end_user: str | None
    state: str  # MADE or UNCONFIRMED
    # The service was suspended when it was asked: a promise (accion 1) reactivates it at
    # once, so a fresh read of the state tells whether an unconfirmed one was made.
    suspended: bool
    fingerprint: str  # of the request that asked it (a repeat of it is recognised)

    def view(self) -> dict[str, Any]:
        """As the account, diagnose and a refusal show it."""
        return {"until": self.until.isoformat(), "invoice_id": self.invoice_id}

    def record(self) -> dict[str, Any]:
        values = asdict(self)
        values["until"] = self.until.isoformat()
        values["created"] = self.created.isoformat()
        return values

    @classmethod
    def of(cls, value: Any) -> Promise | None:
        """A stored record, or None for one this release cannot read (never a guess)."""
        if not isinstance(value, dict):
            return None
        try:
            return cls(
                invoice_id=int(value["invoice_id"]),
                until=date.fromisoformat(value["until"]),
                created=date.fromisoformat(value["created"]),
                at=float(value["at"]),
                caller=value.get("caller"),
                end_user=value.get("end_user"),
                state=MADE if value.get("state") == MADE else UNCONFIRMED,
                suspended=bool(value.get("suspended")),
                fingerprint=str(value.get("fingerprint", "")),
            )
        except (KeyError, TypeError, ValueError):
            return None

    def confirmed(self) -> Promise:
        return replace(self, state=MADE)


class PromiseLedger:
    """Every promise made through the gateway, per service (one store key each)."""

    def __init__(self, store: Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        # A service's record lives as long as any of its promises can still matter: rule 5's
        # window, or a broken promise's cooldown after its latest possible date.
        self.keep_days = max(
            WINDOW_DAYS, settings.PROMISE_MAX_DAYS + settings.PROMISE_COOLDOWN_DAYS
        )

    def today(self) -> date:
        return datetime.now(self.settings.tz).date()

    @staticmethod
    def key(service_id: int) -> str:
        return f"payments:promises:{service_id}"

    def lock(
        self, service_id: int, *, timeout: float, wait: float
    ) -> AbstractAsyncContextManager[None]:
        """One promise step per service at a time, across workers (rules 4-6)."""
        return self.store.lock(
            f"payments:promise:{service_id}", timeout=timeout, blocking_timeout=wait
        )

    async def read(self, service_id: int) -> list[Promise]:
        value = await self.store.get(self.key(service_id))
        rows = value.get("promises") if isinstance(value, dict) else None
        promises = [Promise.of(row) for row in rows or []]
        return [p for p in promises if p is not None]

    async def write(self, service_id: int, promises: list[Promise]) -> None:
        """The service's promises, those past mattering dropped. Written so that it survives
        a failover of the store (a promise is money; set_replicated)."""
        oldest = self.today() - timedelta(days=self.keep_days)
        kept = [p.record() for p in promises if max(p.created, p.until) >= oldest]
        if not kept:
            await self.store.delete(self.key(service_id))
            return
        ttl = (self.keep_days + self.settings.PROMISE_MAX_DAYS + 1) * DAY_SECONDS
        await self.store.set_replicated(self.key(service_id), {"promises": kept}, ttl=ttl)

    async def active(self, service_id: int, owed: OwedInvoices) -> dict[str, Any] | None:
        """kit.promises.ActivePromises: a made promise whose date has not passed and whose
        invoice is still owed (a payment registered meanwhile ends it, as WispHub's own
        promise disappears then). An unconfirmed one is not shown: it may not exist."""
        today = self.today()
        candidates = [
            p for p in await self.read(service_id) if p.state == MADE and p.until >= today
        ]
        if not candidates:
            return None
        owed_ids = set(await owed())
        current = [p for p in candidates if p.invoice_id in owed_ids]
        if not current:
            return None
        return max(current, key=lambda p: (p.until, p.at)).view()


def reference_key(reference: str) -> str:
    """A bank reference as the duplicate guard compares it: case, spaces, dots, dashes,
    slashes and underscores ignored ("ABC-123 45" and "abc12345" are one transfer). Any
    Unicode space is ignored, not only U+0020: a reference admits no other (payments/
    schemas.py), and should that ever change, a no-break space must not make one transfer
    two. ASCII references fold as they always did: the marks already kept still match."""
    folded = "".join(ch for ch in reference.casefold() if not ch.isspace() and ch not in _IGNORED)
    return hashlib.sha256(folded.encode()).hexdigest()


class ReportMarks:
    """The duplicate guard of payment reports: one mark per (service, reference)."""

    def __init__(self, store: Store, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock

    @staticmethod
    def key(service_id: int, reference: str) -> str:
        return f"payments:report:{service_id}:{reference_key(reference)}"

    async def claim(self, service_id: int, reference: str, entry: dict[str, Any]) -> bool:
        """True when this report is the first with its reference in REPORT_DAYS (atomic:
        of two at once, one wins)."""
        entry = {**entry, "at": self.clock()}
        return await self.store.set_if_absent(
            self.key(service_id, reference), entry, ttl=REPORT_DAYS * DAY_SECONDS
        )

    async def earlier(self, service_id: int, reference: str) -> dict[str, Any] | None:
        value = await self.store.get(self.key(service_id, reference))
        return value if isinstance(value, dict) else None

    async def release(self, service_id: int, reference: str) -> None:
        """The report did not reach staff: the reference may be sent again."""
        await self.store.delete(self.key(service_id, reference))

    @staticmethod
    def day_key(service_id: int, day: date) -> str:
        return f"payments:reports:{service_id}:{day.isoformat()}"

    async def count(self, service_id: int, day: date, amount: int = 1) -> int:
        """Add `amount` to the service's reports of `day` (atomic); the new count."""
        return await self.store.incr(self.day_key(service_id, day), amount, ttl=2 * DAY_SECONDS)
