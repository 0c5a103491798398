"""GET /api/v1/clients/{id}/account: what the customer owes, from the cached pending list."""

from __future__ import annotations

import re

from tests.accounts.conftest import StartAccounts, day


def test_account_lists_pending_invoices_oldest_due_first(start_accounts: StartAccounts) -> None:
    _, gw = start_accounts()
    response = gw.get("/api/v1/clients/202/account")
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is True and body["type"] == "success"
    assert body["action"] == "account_found"
    assert body["meta"] is None
    data = body["data"]
    assert data["service_id"] == 202
    assert data["service_state"] == "suspended"
    assert data["invoice_status"] == "Vencidas"
    assert data["balance"] == 92500.5
    assert data["cut_off_date"] == "2026-03-05"
    assert [i["invoice_id"] for i in data["pending_invoices"]] == [9003, 9002, 9009, 9004]
    first = data["pending_invoices"][0]
    assert first == {
        "invoice_id": 9003,
        "total": 40000.0,
        "issued_on": day(-75),
        "due_on": day(-60),
        "overdue": True,
    }
    overdue = {i["invoice_id"]: i["overdue"] for i in data["pending_invoices"]}
    assert overdue == {9003: True, 9002: True, 9009: False, 9004: False}
    assert data["total_due"] == 92501.5
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", data["as_of"])
