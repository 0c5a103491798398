"""A pending-invoice list that comes back empty while the invoices it listed are still owed
is a failed read (BEYOND.md, CALLERS.md 2): never "owes nothing" on the account, and never a
diagnose telling a suspended customer who owes to ask for a reconnection."""

from __future__ import annotations

import time

import pytest

from tests.accounts.conftest import INVOICES, StartAccounts, warm_invoices


@pytest.mark.parametrize("mode", ["bare", "paged"])
def test_a_blank_list_while_invoices_are_owed_is_never_owes_nothing(
    start_accounts: StartAccounts, mode: str
) -> None:
    sim, gw = start_accounts(INVOICE_CACHE_SECONDS=1)
    sim.state.faults.update(
        {"blank_list": mode, "scopes": {"blank_list": {"path_prefix": "/api/facturas/"}}}
    )
    loads = gw.runtime.services.accounts.invoices.loads
    # Past the list's lifetime, with its reloads reading nothing: the last whole copy
    # answers (stale), or the balance is unconfirmed; never a debt of 0.
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        response = gw.get("/api/v1/clients/202/account")
        assert response.status_code in (200, 502), response.text
        if response.status_code == 200:
            assert response.json()["data"]["total_due"] == 92501.5
        diagnosis = gw.post("/api/v1/clients/202/diagnose?wait=0")
        assert diagnosis.status_code in (200, 502), diagnosis.text
        if diagnosis.status_code == 200:
            assert diagnosis.json()["data"]["next_step"] != "reconnect"
        time.sleep(0.2)
    assert gw.runtime.services.accounts.invoices.loads == loads  # none taken
    sim.state.faults.reset()


def test_an_empty_list_is_taken_when_the_invoices_it_listed_are_paid(
    start_accounts: StartAccounts,
) -> None:
    sim, gw = start_accounts(INVOICE_CACHE_SECONDS=1)
    loads = gw.runtime.services.accounts.invoices.loads
    for row in INVOICES:
        sim.state.set_invoice_state(row["id_factura"], 2)  # every one paid
    warm_invoices(gw, loads=loads + 1)
    response = gw.get("/api/v1/clients/202/account")
    assert response.status_code == 200, response.text
    assert response.json()["data"]["total_due"] == 0
