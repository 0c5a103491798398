"""WispHub payment methods (`/api/formas-de-pago/`): a handful of `{id, nombre}` rows.

Registering a payment moves money; the service never does it, so only the list is read.
"""

from __future__ import annotations

from typing import Any, TypedDict

from isp_gateway.upstream.gateway import UpstreamGateway
from isp_gateway.upstream.records import as_int

PAYMENT_METHODS_PATH = "api/formas-de-pago/"


class PaymentMethod(TypedDict):
    id: int
    name: str


def map_payment_methods(rows: list[dict[str, Any]]) -> list[PaymentMethod]:
    methods: list[PaymentMethod] = []
    for row in rows:
        method_id = as_int(row.get("id"))
        name = row.get("nombre")
        if method_id is None or not isinstance(name, str) or not name.strip():
            continue
        methods.append({"id": method_id, "name": name.strip()})
    return methods


async def fetch_payment_methods(
    gateway: UpstreamGateway, *, background: bool
) -> list[PaymentMethod]:
    """Every payment method (paginated on some accounts, one page on others)."""
    rows = await gateway.get_all_pages(PAYMENT_METHODS_PATH, background=background)
    return map_payment_methods(rows)
