"""Reading invoice rows: totals, states, clients and duplicates (no server needed)."""

from __future__ import annotations

from typing import Any

import pytest

from isp_gateway.accounts.service import build_invoice_index
from isp_gateway.upstream.invoices import map_pending, parse_total
from isp_gateway.upstream.payments import map_payment_methods


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("40000.00", 40000.0),
        (" 12500.5 ", 12500.5),
        (40000, 40000.0),
        (0, 0.0),
        (55000.25, 55000.25),
        ("40.000,00", None),  # a European format: never guessed
        ("40,000.00", None),
        ("$40000", None),
        ("-100.00", None),  # a negative total would shrink the debt
        (-1, None),
        ("", None),
        (None, None),
        (True, None),
        (float("nan"), None),
        (float("inf"), None),
        ("1e5", None),
    ],
)
def test_parse_total(raw: Any, expected: float | None) -> None:
    assert parse_total(raw) == expected


def row(number: Any, user: Any, **fields: Any) -> dict[str, Any]:
    base = {
        "id_factura": number,
        "cliente": {"usuario": user, "nombre": "X"},
        "total": "10.00",
        "fecha_emision": "2026-03-01",
        "fecha_vencimiento": "2026-03-16",
        "estado": 1,
    }
    return {**base, **fields}


def test_map_pending_keeps_only_usable_pending_rows_once() -> None:
    rows = [
        row(1, "a@isp"),
        row(1, "a@isp"),  # the same row again (the list shifted between pages)
        row("2", "a@isp", estado="1", fecha_vencimiento="16/03/2026"),
        row(3, "a@isp", estado=2),  # paid: the filter was ignored
        row(4, "a@isp", estado="Pendiente de Pago"),
        row(5, "a@isp", estado="Pagada"),
        row(None, "a@isp"),
        row(6, None),
        row(7, "b@isp", cliente="b@isp"),  # a bare username
        row(8, "c@isp", total="abc"),
    ]
    pairs = map_pending(rows)
    assert [(user, inv["invoice_id"]) for user, inv in pairs] == [
        ("a@isp", 1),
        ("a@isp", 2),
        ("a@isp", 4),
        ("b@isp", 7),
        ("c@isp", 8),
    ]
    assert pairs[1][1]["due_on"] == "2026-03-16"
    index = build_invoice_index({"invoices": [list(pair) for pair in pairs]})  # as from JSON
    assert [u for u in ("a@isp", "b@isp", "c@isp") if index.unreadable(u)] == ["c@isp"]
    assert index.count == 5


def test_index_orders_oldest_due_first_and_undated_last() -> None:
    pairs = map_pending(
        [
            row(10, "a@isp", fecha_vencimiento="2026-05-01"),
            row(11, "a@isp", fecha_vencimiento=None),
            row(12, "a@isp", fecha_vencimiento="2026-01-01"),
            row(9, "a@isp", fecha_vencimiento="2026-05-01"),
        ]
    )
    index = build_invoice_index({"invoices": pairs})
    assert [i["invoice_id"] for i in index.invoices("a@isp")] == [12, 9, 10, 11]


def test_payment_methods_need_an_id_and_a_name() -> None:
    rows = [
        {"id": 7, "nombre": "efectivo"},
        {"id": "8", "nombre": " Nequi "},
        {"id": 9, "nombre": ""},
        {"id": None, "nombre": "x"},
        {"id": 10},
    ]
    assert map_payment_methods(rows) == [{"id": 7, "name": "efectivo"}, {"id": 8, "name": "Nequi"}]
