"""GET /api/v1/payment-methods: the ISP's payment methods, cached with stale-if-error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.accounts.conftest import StartAccounts, write_data
from tests.support import wait_until


def stale_answer(body: dict[str, Any]) -> dict[str, Any] | None:
    return body if body["meta"] is not None else None


def test_payment_methods_listed_and_cached(start_accounts: StartAccounts) -> None:
    sim, gw = start_accounts()
    for _ in range(3):
        response = gw.get("/api/v1/payment-methods")
        assert response.status_code == 200
        body = response.json()
        assert (body["ok"], body["action"], body["meta"]) == (True, "payment_methods_listed", None)
        assert body["data"] == [{"id": 7, "name": "efectivo"}, {"id": 9, "name": "Nequi"}]
    assert sim.state.calls["GET /api/formas-de-pago/"] == 1


def test_none_configured_is_an_empty_list(
    start_accounts: StartAccounts, account_data: Path
) -> None:
    write_data(account_data, payment_methods=[])
    _, gw = start_accounts()
    body = gw.get("/api/v1/payment-methods").json()
    assert (body["action"], body["data"]) == ("payment_methods_listed", [])


def test_an_old_copy_answers_stale_while_the_upstream_fails(start_accounts: StartAccounts) -> None:
    sim, gw = start_accounts(PAYMENT_METHODS_CACHE_SECONDS=1)
    assert gw.get("/api/v1/payment-methods").json()["meta"] is None
    sim.state.faults.update({"error_rate": 1.0})
    # Past the copy's lifetime (1 s), the old copy answers, stale.
    body = wait_until(lambda: stale_answer(gw.get("/api/v1/payment-methods").json()), interval=0.05)
    assert body["meta"] == {"stale": True}
    assert [m["id"] for m in body["data"]] == [7, 9]


def test_no_copy_and_the_upstream_down_is_a_502(start_accounts: StartAccounts) -> None:
    sim, gw = start_accounts()
    sim.state.faults.update({"error_rate": 1.0})
    response = gw.get("/api/v1/payment-methods")
    assert response.status_code == 502
    assert response.json()["action"] == "upstream_unavailable"
    sim.state.faults.update({"reset": True, "force_403": True})
    response = gw.get("/api/v1/payment-methods")
    assert (response.status_code, response.json()["action"]) == (502, "upstream_unauthorized")


def test_the_new_routes_need_a_token(start_accounts: StartAccounts) -> None:
    _, gw = start_accounts()
    for path in ("/api/v1/payment-methods", "/api/v1/clients/202/account"):
        assert gw.client.get(path).status_code == 401
