"""Accounts (BEYOND.md): what a customer owes, whether the service is cut, how to pay.

Two whole upstream lists are kept as cached resources (cache.py: refresh ahead, single
flight, stale-if-error, shared store): the pending invoices, packed and indexed by the
client's `usuario` (accounts/index.py), and the payment methods. Once warm, an account
answer makes no upstream call, except the one fresh read that confirms a suspended or
cancelled state (`ClientService.confirmed_record`).

Failure semantics: an upstream failure is never "owes nothing". A pending list that could
not be read whole, with no complete copy to fall back on, and a client with an invoice whose
total is unreadable, both answer 502 `upstream_unavailable`.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from isp_gateway.accounts.index import InvoiceIndex, build_invoice_index, pack_invoices
from isp_gateway.clients.service import ClientService
from isp_gateway.kit.cache import CachedResource
from isp_gateway.kit.errors import (
    UpstreamError,
    UpstreamRateLimited,
    UpstreamUnauthorized,
    UpstreamUnavailable,
)
from isp_gateway.kit.trim import release_free_memory
from isp_gateway.upstream.invoices import fetch_pending, still_owed
from isp_gateway.upstream.payments import PaymentMethod, fetch_payment_methods
from isp_gateway.web.params import parse_service_id

if TYPE_CHECKING:
    from isp_gateway.kit.promises import ActivePromises
    from isp_gateway.parts import Parts


log = logging.getLogger("isp_gateway.accounts")

# An empty owed list is checked against this many of the newest invoices the last whole
# read listed.
OWED_SAMPLE = 3
OWED_SAMPLE_KEY = "invoices:pending:sample"

# "Cannot confirm the balance": never "owes nothing" (kit/messages).
BALANCE_UNCONFIRMED = "balance"


def balance_unconfirmed() -> UpstreamUnavailable:
    return UpstreamUnavailable(variant=BALANCE_UNCONFIRMED)


@dataclass(frozen=True)
class Account:
    data: dict[str, Any]
    stale: bool


@dataclass(frozen=True)
class PaymentMethods:
    methods: list[PaymentMethod]
    stale: bool


class AccountService:
    def __init__(
        self, parts: Parts, *, clients: ClientService, promises: ActivePromises | None = None
    ) -> None:
        self.settings = settings = parts.settings
        self.gateway, self.clients, self.store = parts.gateway, clients, parts.store
        # The payment-promise ledger (payments/ledger.py), for the account's `promise`.
        self.promises = promises
        lists = parts.lists
        self.invoices: CachedResource[InvoiceIndex] = lists.resource(
            "invoices:pending",
            self._load_invoices,
            self._index_invoices,
            ttl=float(settings.INVOICE_CACHE_SECONDS),
        )
        self.payment_methods_cache: CachedResource[list[PaymentMethod]] = lists.resource(
            "payments:methods",
            self._load_payment_methods,
            list,
            ttl=float(settings.PAYMENT_METHODS_CACHE_SECONDS),
        )

    async def start(self) -> None:
        """Warm the pending-invoice list and keep it fresh (start-up does not wait)."""
        self.invoices.start()

    async def aclose(self) -> None:
        await self.invoices.aclose()
        await self.payment_methods_cache.aclose()

    async def _load_invoices(self, background: bool) -> dict[str, Any]:
        pairs = await fetch_pending(self.gateway, background=background)
        if pairs:
            # The newest ids a whole read listed (no expiry: they outlive the cached copy
            # and a restart), for the day the list comes back empty.
            listed = sorted((i["invoice_id"] for _, i in pairs), reverse=True)[:OWED_SAMPLE]
            if await self.store.get(OWED_SAMPLE_KEY) != listed:
                await self.store.set(OWED_SAMPLE_KEY, listed)
        else:
            await self._confirm_empty()
        return pack_invoices(pairs)

    async def _confirm_empty(self) -> None:
        """An empty owed list is taken only when the invoices the last whole one listed are
        no longer owed, each read on its own; one still owed makes it a failed read (the
        stale copy answers, or 502 "cannot confirm the balance"). A 200 with `[]`, or a page
        counting 0, is no proof that everyone paid: taken, it would tell every customer they
        owe nothing, and diagnose a suspended one who owes to ask for a reconnection."""
        listed = await self.store.get(OWED_SAMPLE_KEY)
        for invoice_id in listed if isinstance(listed, list) else []:
            if await still_owed(self.gateway, int(invoice_id)):
                log.warning(
                    "pending invoices read empty while invoice %d is still owed: "
                    "a failed read, not taken",
                    int(invoice_id),
                )
                raise UpstreamUnavailable()
        if listed:
            await self.store.delete(OWED_SAMPLE_KEY)

    @staticmethod
    def _index_invoices(value: Any) -> InvoiceIndex:
        index = build_invoice_index(value)
        # 125 pages of parsed rows were freed when the load packed them: give that back.
        release_free_memory()
        return index

    async def _load_payment_methods(self, background: bool) -> list[PaymentMethod]:
        return await fetch_payment_methods(self.gateway, background=background)

    # -- reading ---------------------------------------------------------------------

    async def pending_index(self) -> tuple[InvoiceIndex, float, bool]:
        """(index, load time, stale) of the pending list; failures mapped so that no
        failure reads as an empty list (the rate limit and our key keep their own errors)."""
        try:
            # One client's balance needs the whole list (the backend ignores a client filter
            # on invoices), and a first read of a large one takes minutes under the budget.
            # An answer waits for a read under way no longer than one upstream call may
            # take, then says it cannot confirm the balance now; the read goes on.
            async with asyncio.timeout(self.settings.UPSTREAM_TIMEOUT_SECONDS):
                snapshot = await self.invoices.get()
        except (UpstreamUnauthorized, UpstreamRateLimited):
            raise
        except (UpstreamError, TimeoutError):
            raise balance_unconfirmed() from None
        return snapshot.value, snapshot.loaded_at, snapshot.stale

    def _today(self) -> str:
        return datetime.now(self.settings.tz).date().isoformat()

    def _minute(self, moment: float) -> str:
        return datetime.fromtimestamp(moment, self.settings.tz).strftime("%Y-%m-%d %H:%M")

    async def pending_of(self, username: str | None) -> tuple[list[dict[str, Any]], float, bool]:
        """(pending invoices oldest due first with `overdue`, load time, stale) for one
        username; 502 when one of them has an unreadable total, or without a username.
        For diagnose too."""
        index, loaded_at, stale = await self.pending_index()
        # Invoices are matched by username only: without one, an empty list would be a
        # guess that the customer owes nothing.
        if username is None:
            raise balance_unconfirmed()
        pending = index.invoices(username)
        if any(invoice["total"] is None for invoice in pending):
            raise balance_unconfirmed()
        today = self._today()
        invoices = [
            {**invoice, "overdue": invoice["due_on"] is not None and invoice["due_on"] < today}
            for invoice in pending
        ]
        return invoices, loaded_at, stale

    async def account(self, raw_service_id: str) -> Account:
        """The account answer of one client (400/404/502 as BEYOND.md says)."""
        service_id = parse_service_id(raw_service_id)
        record, client_stale = await self.clients.confirmed_record(service_id)
        invoices, loaded_at, stale = await self.pending_of(record["username"])
        client = record["client"]
        # Summed exactly, then rounded to cents: float noise must not show in money.
        total_due = round(math.fsum(i["total"] for i in invoices), 2)
        data = {
            "service_id": service_id,
            "service_state": client["service_state"],
            "invoice_status": record["invoice_status"],
            "balance": client["outstanding_balance"],
            "cut_off_date": client["cut_off_date"],
            "pending_invoices": invoices,
            "total_due": total_due,
            "as_of": self._minute(loaded_at),
            "promise": await self.active_promise(service_id, invoices),
        }
        return Account(data, stale or client_stale)

    async def active_promise(
        self, service_id: int, invoices: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """The service's active payment promise (MONEY.md 1), given its owed invoices."""
        if self.promises is None:
            return None
        owed = [invoice["invoice_id"] for invoice in invoices]

        async def owed_ids() -> list[int]:
            return owed

        return await self.promises.active(service_id, owed_ids)

    async def payment_methods(self) -> PaymentMethods:
        snapshot = await self.payment_methods_cache.get()
        return PaymentMethods(list(snapshot.value), snapshot.stale)
