"""The receipts a worker holds in memory at once, and the part of them one caller may hold
(docs/payments.md "Held in memory, not piped through").

A report's receipt is held whole, at most RECEIPT_MAX_BYTES, from its first byte until the
backend has it, so a worker takes at most RECEIPTS_AT_ONCE at a time: one more is refused
with 503 `receipts_busy` before its body is read. Those slots are a resource callers share,
so no caller may hold more than RECEIPTS_PER_CALLER of them (CALLERS.md 6: limits no key can
escape): a key that opens uploads and stalls them leaves the other half to every other
caller, whatever it does. The caller is the credential (an API key, or the JWT user), never
X-End-User-Id, which is the caller's own claim. Counted in the worker, as the memory is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from isp_gateway.kit.actions import Action
from isp_gateway.kit.callers import current_caller
from isp_gateway.payments.errors import PaymentsBusy

# Receipts a worker holds in memory at once (each at most RECEIPT_MAX_BYTES: 40 MiB at the
# default cap), and how many of them one caller may hold: half, so a caller alone can
# never starve the others, and one that is alone still has several uploads under way.
RECEIPTS_AT_ONCE = 8
RECEIPTS_PER_CALLER = max(1, RECEIPTS_AT_ONCE // 2)


class ReceiptSlots:
    """This worker's receipt slots, counted per caller."""

    def __init__(self, total: int = RECEIPTS_AT_ONCE, per_caller: int = RECEIPTS_PER_CALLER):
        self.total, self.per_caller = total, per_caller
        self.held = 0
        self._by_caller: dict[str, int] = {}

    @asynccontextmanager
    async def taken(self) -> AsyncIterator[None]:
        """One slot for the request's caller while the block runs, or 503 `receipts_busy`
        (with Retry-After) at once when the worker's are all taken or the caller holds its
        part. Checked and taken with no await between: one event loop, no race."""
        who = current_caller()
        caller = who.caller if who is not None else ""
        mine = self._by_caller.get(caller, 0)
        if self.held >= self.total or mine >= self.per_caller:
            raise PaymentsBusy(Action.PAYMENT_REPORT_FAILED, "receipts_busy")
        self.held += 1
        self._by_caller[caller] = mine + 1
        try:
            yield
        finally:
            self.held -= 1
            left = self._by_caller[caller] - 1
            if left:
                self._by_caller[caller] = left
            else:
                del self._by_caller[caller]
