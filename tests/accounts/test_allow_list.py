"""No client-bearing answer ever carries a password, the GPS coordinates or a MAC.

The upstream rows hold all of them (UPSTREAM.md "More of the same API"); the service passes
on only the fields it names, so a field the backend adds later stays private too.
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.accounts.conftest import SECRETS, StartAccounts, client

FORBIDDEN_KEYS = ("password", "coordenadas", "mac", "usuario", "username")
VERIFY_MISMATCH = {
    "name": "SOMEONE ELSE",
    "address": "CALLE 1 # 2-3",
    "internet_plan_name": "PLAN 10MB",
    "internet_plan_price": 40000,
}
RESOLVE = {**VERIFY_MISMATCH, "name": "CLIENTE 201"}


def keys(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [k for k, v in value.items() for k in (k, *keys(v))]
    if isinstance(value, list):
        return [k for item in value for k in keys(item)]
    return []


def assert_private(response: httpx.Response) -> None:
    assert response.status_code == 200, response.text
    for secret in SECRETS.values():
        assert secret not in response.text
    for key in keys(response.json()):
        assert not any(word in key.lower() for word in FORBIDDEN_KEYS), key


def test_no_client_answer_leaks_a_private_field(start_accounts: StartAccounts) -> None:
    sim, gw = start_accounts()
    answers = {
        "list": gw.get("/api/v1/clients/"),
        "search": gw.get("/api/v1/clients/search", params={"q": "cliente"}),
        "verify with debug": gw.post("/api/v1/clients/201/verify", json=VERIFY_MISMATCH),
        "resolve": gw.post("/api/v1/clients/resolve", json=RESOLVE),
        "update": gw.put("/api/v1/clients/201", json={"phone": "3001112233"}),
        "account": gw.get("/api/v1/clients/202/account"),
    }
    # Each lookup twice: the first through the route, the second through the fast path.
    for round_ in (1, 2):
        answers[f"by-document {round_}"] = gw.get("/api/v1/clients/by-document/1000201")
        answers[f"by-phone {round_}"] = gw.get("/api/v1/clients/by-phone/3001112233")
        answers[f"by-service-id {round_}"] = gw.get("/api/v1/clients/by-service-id/202")
    # A client the cached list does not hold is read from the upstream directly.
    sim.state.add_client(client(299, "new@isp"))
    answers["lookup miss"] = gw.get("/api/v1/clients/by-service-id/299")
    answers["account of a miss"] = gw.get("/api/v1/clients/299/account")
    for name, response in answers.items():
        assert_private(response)
        assert response.json()["ok"] is True, name
    assert answers["list"].json()["data"]
    assert answers["search"].json()["data"]
    assert answers["verify with debug"].json()["data"]["debug"] is not None
    assert answers["resolve"].json()["data"]["service_id"] == 201
    assert answers["by-phone 2"].json()["data"]["service_id"] == 201  # after the update
    assert answers["lookup miss"].json()["data"]["service_id"] == 299
    assert sim.state.calls["GET /api/clientes/"] >= 1


def test_the_account_shows_no_username(start_accounts: StartAccounts) -> None:
    # Invoices are matched by `usuario`, yet the login name is not the bot's to show.
    _, gw = start_accounts()
    response = gw.get("/api/v1/clients/202/account")
    assert_private(response)
    assert "beto@isp" not in response.text
