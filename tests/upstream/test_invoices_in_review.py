"""An invoice in review ("En revisión", after a payment report) is still owed: the owed-list
reader keeps it beside the pending ones, so a receipt sent never reads as "owes nothing"."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from isp_gateway.simulator import suspended_debtors
from isp_gateway.store import MemoryStore
from isp_gateway.upstream.budget import RateBudget
from isp_gateway.upstream.gateway import UpstreamGateway, build_http_client
from isp_gateway.upstream.invoices import fetch_pending, map_pending
from tests.conftest import API_KEY, StartSimulator, gateway_settings

pytestmark = pytest.mark.anyio


@pytest.fixture
async def connect(password_hash: str) -> AsyncIterator[Callable[..., UpstreamGateway]]:
    clients: list[httpx.AsyncClient] = []

    def make(url: str, **overrides: Any) -> UpstreamGateway:
        settings = gateway_settings(url, password_hash, **overrides)
        http = build_http_client(settings)
        clients.append(http)
        return UpstreamGateway(settings, http, RateBudget(MemoryStore(), 100_000, 1_000_000))

    yield make
    for http in clients:
        await http.aclose()


def row(invoice_id: int, estado: Any) -> dict[str, Any]:
    return {
        "id_factura": invoice_id,
        "cliente": {"usuario": "ana@isp", "nombre": "ANA"},
        "total": "40000.00",
        "fecha_emision": "2026-03-01",
        "fecha_vencimiento": "2026-03-16",
        "estado": estado,
    }


def test_rows_in_review_are_owed_and_paid_ones_are_not() -> None:
    rows = [
        row(1, 1),
        row(2, 4),
        row(3, "4"),
        row(4, "En revisión"),
        row(5, "EN REVISION"),
        row(6, 2),
        row(7, 3),
        row(8, 5),
        row(9, "Pagada"),
        row(10, "Se Transfirio"),
    ]
    assert [invoice["invoice_id"] for _, invoice in map_pending(rows)] == [1, 2, 3, 4, 5]


async def test_a_reported_invoice_stays_owed_until_staff_register_its_payment(
    start_simulator: StartSimulator, connect: Callable[..., UpstreamGateway]
) -> None:
    sim = start_simulator()
    client, invoices = suspended_debtors(sim.state.dataset)[0]
    invoice_id = invoices[0]
    gateway = connect(sim.url, UPSTREAM_PAGE_SIZE=50)

    async def owed() -> list[int]:
        pairs = await fetch_pending(gateway, background=False)
        ids = [invoice["invoice_id"] for _, invoice in pairs]
        assert len(ids) == len(set(ids))  # each once
        return [i for (user, inv), i in zip(pairs, ids, strict=True) if user == client["usuario"]]

    before = await owed()
    assert invoice_id in before
    with httpx.Client(base_url=sim.url, headers={"Authorization": f"Api-Key {API_KEY}"}) as http:
        reported = http.post(
            f"/api/facturas/reportar-pago/{invoice_id}/",
            data={"forma_pago": "7", "fecha_pago": "2026-11-20", "referencia": "R-1"},
            files={"comprobante_pago": ("r.pdf", b"%PDF-1.4 recibo", "application/pdf")},
        )
        assert reported.status_code == 200
        assert http.get(f"/api/facturas/{invoice_id}/").json()["estado"] == "En revisión"
        assert sorted(await owed()) == sorted(before)
        # Staff accept the report: the payment is registered, the invoice is no longer owed.
        http.put("/_sim/payments", json={"invoice_id": invoice_id, "estado": 2})
    assert sorted(await owed()) == sorted(i for i in before if i != invoice_id)
