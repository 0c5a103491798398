"""What the account and diagnose read of the payment-promise ledger (MONEY.md 1).

The ledger belongs to the payments feature (payments/ledger.py), which sits above the
account it reads invoices from; the account shows the service's active promise through this
protocol, handed to it by services.py, so no feature imports one above it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import Any, Protocol

# The ids of the service's owed invoices, read only when a promise needs them.
OwedInvoices = Callable[[], Awaitable[Collection[int]]]


class ActivePromises(Protocol):
    async def active(self, service_id: int, owed: OwedInvoices) -> dict[str, Any] | None:
        """The service's active promise as `{"until": "YYYY-MM-DD", "invoice_id"}`: one made
        through the gateway whose date has not passed and whose invoice is still owed; None
        when there is none. `owed` is awaited only when the ledger holds a candidate."""
