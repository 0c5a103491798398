"""WispHub invoices (`/api/facturas/`): the owed list, read whole, and its rows.

The upstream ignores client filters on this list (the whole list comes back), so the service
reads every page of the owed invoices and matches them to clients by `cliente.usuario` in
code. A read cut off before the last page raises (the gateway's paging never returns part of
a list), so it can never pass for "owes nothing".

Owed means pending (`estado` 1, "Pendiente de Pago") or in review (4, "En revisión": a
customer's payment report awaits staff, UPSTREAM.md "Payments, promises and reports"). A
report registers no money and staff may reject it, so its invoice is still owed: the account,
diagnose and the promise rules count it as pending, and a bot never says "owes nothing"
because a receipt was sent. The two states are two filtered reads, pending first: an invoice
moving from pending to review while they run is in one of them.
"""

from __future__ import annotations

import logging
import math
import re
from typing import Any, TypedDict

from isp_gateway.kit.errors import UpstreamRejected, UpstreamUnavailable
from isp_gateway.kit.text import fold
from isp_gateway.upstream.clients import parse_cut_off
from isp_gateway.upstream.gateway import UpstreamGateway
from isp_gateway.upstream.records import as_int

log = logging.getLogger("isp_gateway.upstream.invoices")

INVOICES_PATH = "api/facturas/"
PENDING = 1
IN_REVIEW = 4
# The states read as owed, in reading order, and their labels (folded, as on some answers).
OWED_STATES = (PENDING, IN_REVIEW)
OWED_LABELS = frozenset({"pendiente de pago", "en revision"})

# A total is a JSON number or a plain decimal string ("40000.00"). Anything else
# ("40.000,00", "$40,000") is unreadable rather than guessed: a wrong parse could only ever
# report a smaller debt.
_DECIMAL = re.compile(r"^\s*\d+(?:\.\d+)?\s*$")


class PendingInvoice(TypedDict):
    """One owed invoice (pending or in review) as the account answer shows it (`total`
    None: unreadable)."""

    invoice_id: int
    total: float | None
    issued_on: str | None
    due_on: str | None


def parse_total(value: Any) -> float | None:
    """A non-negative finite total from a number or a decimal string; else None."""
    if isinstance(value, bool):
        return None
    readable = isinstance(value, int | float) or (
        isinstance(value, str) and _DECIMAL.match(value) is not None
    )
    if not readable:
        return None
    number = float(value)
    return number if math.isfinite(number) and number >= 0 else None


def _username(value: Any) -> str | None:
    """`cliente` is an object with `usuario` (some rows may carry the bare username)."""
    if isinstance(value, dict):
        value = value.get("usuario")
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _is_pending(value: Any) -> bool:
    """Whether a row is owed (pending or in review). The list filter works, but a row that
    says another state is not owed; the state is a number (or digit string) in lists and a
    label on some answers."""
    if value is None:
        return True
    number = as_int(value)
    if number is not None:
        return number in OWED_STATES
    return isinstance(value, str) and fold(value) in OWED_LABELS


def map_pending(rows: list[dict[str, Any]]) -> list[tuple[str, PendingInvoice]]:
    """(username, invoice) per usable pending row; rows without an id or a client are
    dropped, repeated ids (a row shifting between pages while the list changed) kept once."""
    out: list[tuple[str, PendingInvoice]] = []
    seen: set[int] = set()
    for row in rows:
        invoice_id = as_int(row.get("id_factura"))
        username = _username(row.get("cliente"))
        if invoice_id is None or username is None or invoice_id in seen:
            continue
        if not _is_pending(row.get("estado")):
            continue
        seen.add(invoice_id)
        total = parse_total(row.get("total"))
        if total is None:
            # Logged without the client: the id is enough to find the row upstream.
            log.warning(
                "invoice %d: unreadable total; its client's balance is unconfirmed", invoice_id
            )
        out.append(
            (
                username,
                {
                    "invoice_id": invoice_id,
                    "total": total,
                    "issued_on": parse_cut_off(row.get("fecha_emision")),
                    "due_on": parse_cut_off(row.get("fecha_vencimiento")),
                },
            )
        )
    return out


async def fetch_pending(
    gateway: UpstreamGateway, *, background: bool
) -> list[tuple[str, PendingInvoice]]:
    """Every owed invoice (pending, then in review), every page; raises an UpstreamError
    when any page fails. Each page is mapped as it arrives, so the raw rows of a list of
    100,000 invoices are never all held at once; an id repeated across pages or lists is
    kept once, as `map_pending` keeps it within one."""
    out: list[tuple[str, PendingInvoice]] = []
    seen: set[int] = set()
    for state in OWED_STATES:
        pages = await gateway.get_all_pages_as(
            INVOICES_PATH, map_pending, {"estado": state}, background=background
        )
        for page in pages:
            for username, invoice in page:
                if invoice["invoice_id"] not in seen:
                    seen.add(invoice["invoice_id"])
                    out.append((username, invoice))
    return out


async def still_owed(gateway: UpstreamGateway, invoice_id: int) -> bool:
    """Whether one invoice is still owed, read on its own (`estado` is a label there); one
    the backend no longer knows (404) is not. Raises the gateway's errors, and
    UpstreamUnavailable for a 200 that is no invoice."""
    try:
        body = await gateway.get_json(f"{INVOICES_PATH}{invoice_id}/")
    except UpstreamRejected as exc:
        if exc.upstream_status == 404:
            return False
        raise
    if not isinstance(body, dict):
        raise UpstreamUnavailable()
    # An unreadable state is owed (_is_pending): the safe side of a debt.
    return _is_pending(body.get("estado"))
