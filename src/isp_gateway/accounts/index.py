"""The pending-invoice list as one packed string, and the index over it.

At 200,000 clients the pending list holds over 100,000 invoices; as a dict per invoice in a
list per username it cost about 700 bytes an invoice in every worker, and the loading worker
kept the raw pairs as well. Packed, an invoice is one JSON line of about 60 ASCII bytes
(`[username, invoice_id, total, issued_on, due_on]`), the lines sorted by username, then due
date (undated last), then id. The same string is the cached value (one copy in the store, in
Redis, and in the index that keeps it), and a username's invoices are found by bisecting the
lines: no per-invoice or per-user object is held, and an account answer decodes only the
lines of its own client.
"""

from __future__ import annotations

import bisect
import json
from array import array
from collections.abc import Iterable
from json.decoder import scanstring  # type: ignore[attr-defined]  # (untyped, stdlib)
from typing import Any

from isp_gateway.clients.index import line_bounds
from isp_gateway.upstream.invoices import PendingInvoice

PACKED_FORMAT = "invoice-lines/1"
_NO_DUE_DATE = "9999-99-99"  # sorts invoices without a readable due date last


def _order(pair: tuple[str, PendingInvoice] | list[Any]) -> tuple[str, str, int]:
    username, invoice = pair
    return username, invoice["due_on"] or _NO_DUE_DATE, invoice["invoice_id"]


def pack_invoices(pairs: Iterable[tuple[str, PendingInvoice] | list[Any]]) -> dict[str, Any]:
    """The cached value: (username, invoice) pairs as sorted packed lines, JSON-ready."""
    lines = [
        json.dumps(
            [username, i["invoice_id"], i["total"], i["issued_on"], i["due_on"]],
            separators=(",", ":"),
        )
        for username, i in sorted(pairs, key=_order)
    ]
    return {"format": PACKED_FORMAT, "lines": "\n".join(lines)}


class InvoiceIndex:
    """The pending list by username: each user's invoices oldest due first; a user with an
    invoice whose total could not be read is `unreadable` (their debt is unknown)."""

    def __init__(self, value: Any) -> None:
        if isinstance(value, dict) and "invoices" in value:
            # A list cached by an older release (pairs of dicts): packed on adoption.
            value = pack_invoices(value["invoices"])
        text: str = (value or {}).get("lines") or ""
        self._text = text
        self._starts = line_bounds(text) if text else array("I", [0])
        self.count = len(self._starts) - 1

    def _line(self, n: int) -> str:
        return self._text[self._starts[n] : self._starts[n + 1] - 1]

    def _username(self, n: int) -> str:
        # The line opens with `["`: only the username is decoded (C speed), not the line.
        return str(scanstring(self._text, self._starts[n] + 2)[0])

    def _range(self, username: str) -> range:
        first = bisect.bisect_left(range(self.count), username, key=self._username)
        last = first
        while last < self.count and self._username(last) == username:
            last += 1
        return range(first, last)

    def __contains__(self, username: object) -> bool:
        return isinstance(username, str) and bool(self._range(username))

    def invoices(self, username: str) -> list[PendingInvoice]:
        """The user's pending invoices, oldest due first (undated last, then by id)."""
        out: list[PendingInvoice] = []
        for n in self._range(username):
            _, invoice_id, total, issued_on, due_on = json.loads(self._line(n))
            out.append(
                {"invoice_id": invoice_id, "total": total, "issued_on": issued_on, "due_on": due_on}
            )
        return out

    def unreadable(self, username: str) -> bool:
        """Whether one of the user's invoices has a total that could not be read."""
        return any(invoice["total"] is None for invoice in self.invoices(username))


def build_invoice_index(value: Any) -> InvoiceIndex:
    """From the cached value (packed lines, or the older `{"invoices": [[username, invoice],
    ...]}`, JSON-shaped, so pairs may come back from the store as lists)."""
    return InvoiceIndex(value)
