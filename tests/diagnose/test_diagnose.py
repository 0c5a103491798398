"""POST /api/v1/clients/{id}/diagnose: the order of checks, what every answer carries, the
upstream calls on warm caches, shared pings, fresh outage flags and states, failures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from isp_gateway.auth.keys import generate_key, new_entry, write_key_entries
from tests.agents.conftest import call, customer
from tests.clients.conftest import wait_for_list_age
from tests.conftest import Gateway, Simulator, StartGateway, StartSimulator
from tests.diagnose.conftest import (
    GATEWAY_SETTINGS,
    PING_CALLS,
    build_dataset,
    upstream_calls,
    warm,
)
from tests.support import copy_age, data_file_of, wait_until

COMMON = {"service_id", "service_state", "zone_id", "zone_blocked", "open_tickets"}


def diagnose(gw: Gateway, service_id: int | str, **params: object) -> httpx.Response:
    body = params.pop("body", None)
    params.setdefault("wait", 10)
    return gw.post(f"/api/v1/clients/{service_id}/diagnose", params=params, json=body)


def test_an_active_line_is_pinged_and_only_the_ping_reaches_the_upstream(
    gw: Gateway, sim: Simulator
) -> None:
    sim.state.set_ping_outcome(101, "all_replies")
    warm(gw, sim)
    response = diagnose(gw, 101, body={"pings": 5})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["ok"], body["type"], body["action"]) == (True, "success", "stable_connection")
    data = body["data"]
    assert set(data) >= COMMON
    assert (data["service_id"], data["service_state"], data["zone_id"]) == (101, "active", 1)
    assert data["zone_blocked"] is False
    assert [t["ticket_id"] for t in data["open_tickets"]] == [7003, 7002, 7001]
    assert data["sent"] == 5 and data["received"] == 5 and data["loss_percent"] == 0
    assert isinstance(data["task_id"], str)
    # Warm caches: no list read at all, only the ping's create and its polls.
    calls = upstream_calls(sim)
    assert set(calls) <= PING_CALLS and calls["POST /api/clientes/{id}/ping/"] == 1


def test_a_diagnose_and_a_ping_within_seconds_share_one_upstream_task(
    gw: Gateway, sim: Simulator
) -> None:
    warm(gw, sim)
    created = gw.post("/api/v1/101/ping/", json={"pings": 4})
    assert created.status_code == 200
    data = diagnose(gw, 101).json()["data"]
    assert data["task_id"] == created.json()["data"]["task_id"]
    assert sim.state.calls["POST /api/clientes/{id}/ping/"] == 1


def test_a_long_poll_that_runs_out_answers_ping_pending_with_the_common_data(
    gw: Gateway, sim: Simulator
) -> None:
    sim.state.ping_duration = 30
    response = diagnose(gw, 101, wait=0)
    body = response.json()
    assert (response.status_code, body["ok"], body["type"]) == (200, True, "info")
    assert body["action"] == "ping_pending"
    assert set(body["data"]) >= COMMON and body["data"]["task_id"]
    assert body["data"]["sent"] is None


def test_cancelled_comes_first_and_sends_no_ping(gw: Gateway, sim: Simulator) -> None:
    warm(gw, sim)
    body = diagnose(gw, 103).json()
    assert (body["ok"], body["type"], body["action"]) == (True, "info", "service_cancelled")
    data = body["data"]
    assert (data["service_state"], data["zone_id"], data["zone_blocked"]) == (
        "cancelled",
        2,
        True,
    )
    assert [t["ticket_id"] for t in data["open_tickets"]] == [7007]
    assert upstream_calls(sim) == {}


def test_suspended_says_what_is_owed(gw: Gateway, sim: Simulator) -> None:
    warm(gw, sim)
    body = diagnose(gw, 102).json()
    assert (body["ok"], body["type"], body["action"]) == (True, "info", "service_suspended")
    data = body["data"]
    assert data["service_state"] == "suspended"
    assert data["balance"] == 60000.0
    assert data["total_due"] == 60000.5
    assert [i["invoice_id"] for i in data["pending_invoices"]] == [9001, 9002]
    assert data["open_tickets"] == []
    # It owes and has made no payment promise: one is allowed (MONEY.md 1), beside paying.
    assert data["next_step"] == "promise"
    assert "saldo pendiente" in body["message"]
    assert upstream_calls(sim) == {}


DEBT_WORDS = ("saldo", "deuda", "debe", "pago", "pagar", "factura", "pendiente", "mora")


def test_suspended_owing_nothing_is_told_to_reconnect_never_about_debt(
    gw: Gateway, sim: Simulator
) -> None:
    warm(gw, sim)
    # Asked again and again: the answer stays the same, never a debt from another client.
    for _ in range(3):
        body = diagnose(gw, 106).json()
        assert (body["ok"], body["type"], body["action"]) == (True, "info", "service_suspended")
        data = body["data"]
        assert (data["service_state"], data["total_due"]) == ("suspended", 0)
        assert data["pending_invoices"] == []
        assert data["next_step"] == "reconnect"
        message = body["message"].lower()
        assert not [word for word in DEBT_WORDS if word in message], message
    assert upstream_calls(sim) == {}


def test_only_a_suspended_answer_carries_a_next_step(gw: Gateway, sim: Simulator) -> None:
    warm(gw, sim)
    assert "next_step" not in diagnose(gw, 103).json()["data"]


def test_a_suspension_lifted_upstream_is_confirmed_before_it_is_said(
    sim: Simulator, start_gateway: StartGateway
) -> None:
    gw = start_gateway(sim.url, **{**GATEWAY_SETTINGS, "STATE_FRESH_SECONDS": 1})
    warm(gw, sim)
    # The cached row says suspended; the customer paid and the upstream reactivated them.
    sim.state.set_client_fields(102, {"estado": "Activo"})
    sim.state.set_ping_outcome(102, "all_replies")
    wait_for_list_age(gw, 1)
    body = diagnose(gw, 102).json()
    assert body["action"] == "stable_connection", body
    assert body["data"]["service_state"] == "active"
    assert sim.state.calls["GET /api/clientes/"] == 1  # the one-client confirmation


def test_an_outage_on_the_clients_router_is_said_with_its_description(
    sim: Simulator, start_gateway: StartGateway
) -> None:
    sim.state.set_outage(8, True, "Corte de fibra")
    gw = start_gateway(sim.url, **GATEWAY_SETTINGS)
    warm(gw, sim)
    body = diagnose(gw, 104).json()
    assert (body["ok"], body["type"], body["action"]) == (True, "info", "zone_outage")
    assert body["data"]["outage_description"] == "Corte de fibra"
    assert body["data"]["zone_blocked"] is True
    assert upstream_calls(sim) == {}
    # Router 7 (zone 1) is fine: its clients get a ping.
    assert diagnose(gw, 101).json()["action"] != "zone_outage"


def test_the_outage_flag_is_never_older_than_its_lifetime(
    sim: Simulator, start_gateway: StartGateway
) -> None:
    gw = start_gateway(sim.url, **{**GATEWAY_SETTINGS, "OUTAGE_CACHE_SECONDS": 1})
    warm(gw, sim)
    assert diagnose(gw, 101).json()["action"] != "zone_outage"
    # Switched on through the simulator's control API, like an operator upstream.
    control = httpx.put(
        f"{sim.url}/_sim/routers",
        json={"router_id": 7, "outage": True, "description": "Mantenimiento"},
    )
    assert control.status_code == 200 and control.json()["outages"] == {"7": "Mantenimiento"}
    catalogue = gw.runtime.services.outages.catalogue

    def flag_or_expired() -> bool:
        # The copy a refresh fetched after the switch holds the flag; until one does, the
        # copy from before it must expire within its lifetime (1 s), then be read again.
        router = (catalogue.local or {}).get(7)
        age = copy_age(catalogue)
        return bool(router is not None and router.outage) or (age is not None and age >= 1)

    wait_until(flag_or_expired, message="the flag or the copy's lifetime")
    body = diagnose(gw, 101).json()
    assert body["action"] == "zone_outage"
    assert body["data"]["outage_description"] == "Mantenimiento"


def test_an_outage_check_that_fails_is_502_never_a_guess(
    gw_outage_checks_fail: Gateway, sim: Simulator
) -> None:
    gw = gw_outage_checks_fail
    response = diagnose(gw, 101)
    assert response.status_code == 502
    assert response.json()["action"] == "upstream_unavailable"
    assert sim.state.calls["POST /api/clientes/{id}/ping/"] == 0


def test_a_debt_check_that_fails_is_502_never_a_guess(
    sim: Simulator, start_gateway: StartGateway
) -> None:
    # The pending-invoice list never loads.
    sim.state.faults.update({"error_rate": 1.0, "path_prefix": "/api/facturas/"})
    # The check joins the start-up load, whose failing pages are retried in the background
    # before it gives up: short waits between those attempts (default 2, 4 and 8 s).
    gw = start_gateway(sim.url, UPSTREAM_TIMEOUT_SECONDS=1.0, UPSTREAM_PAGE_RETRY_SECONDS=0.05)
    response = diagnose(gw, 102)
    assert response.status_code == 502
    assert response.json()["action"] == "upstream_unavailable"


def test_rows_without_a_router_ask_the_one_client_endpoint_once(
    sim: Simulator, start_gateway: StartGateway
) -> None:
    # An account whose client rows carry no `router`: the one-client endpoint names it.
    sim.state.set_client_router("absent")
    sim.state.set_outage(7, True, "Falla eléctrica")
    gw = start_gateway(sim.url, **GATEWAY_SETTINGS)
    warm(gw, sim)
    assert gw.runtime.services.clients.cache.local.record(105)["router_id"] is None
    for _ in range(2):
        body = diagnose(gw, 105).json()
        assert body["action"] == "zone_outage", body
        assert body["data"]["outage_description"] == "Falla eléctrica"
    assert sim.state.calls["GET /api/clientes/{id}/"] == 1


def test_bad_input(gw: Gateway, sim: Simulator) -> None:
    warm(gw, sim)
    for params in ({"wait": 26}, {"wait": -1}):
        response = gw.post("/api/v1/clients/101/diagnose", params=params)
        assert response.status_code == 422, params
        assert response.json()["action"] == "validation_error"
    for pings in (0, 21, "4"):
        response = diagnose(gw, 101, body={"pings": pings})
        assert response.status_code == 422, pings
        assert response.json()["action"] == "validation_error"
    response = diagnose(gw, "abc")
    assert (response.status_code, response.json()["action"]) == (400, "invalid_service_id")
    response = diagnose(gw, 999_999)
    assert (response.status_code, response.json()["action"]) == (404, "client_not_found")
    assert sim.state.calls["POST /api/clientes/{id}/ping/"] == 0


def test_no_body_uses_four_pings(gw: Gateway, sim: Simulator) -> None:
    sim.state.set_ping_outcome(101, "all_replies")
    response = gw.post("/api/v1/clients/101/diagnose", params={"wait": 10})
    assert response.status_code == 200
    assert response.json()["data"]["sent"] == 4


def test_diagnose_needs_a_token(gw: Gateway) -> None:
    assert gw.client.post("/api/v1/clients/101/diagnose").status_code == 401


def test_the_generated_suspended_customer_owing_nothing_is_told_to_reconnect(
    start_simulator: StartSimulator, start_gateway: StartGateway
) -> None:
    sim = start_simulator(clients=40, answer_cases=True)
    paid_up = sim.state.dataset.clients[-1]
    assert paid_up["estado"] == "Suspendido"
    gw = start_gateway(sim.url)
    warm(gw, sim)
    body = diagnose(gw, paid_up["id_servicio"]).json()
    assert (body["action"], body["data"]["next_step"]) == ("service_suspended", "reconnect")
    assert body["data"]["total_due"] == 0 and body["data"]["pending_invoices"] == []
    message = body["message"].lower()
    assert not [word for word in DEBT_WORDS if word in message], message


def test_a_key_without_accounts_read_is_told_the_state_not_the_debt(
    tmp_path: Path, start_simulator: StartSimulator, start_gateway: StartGateway
) -> None:
    """The debt is the account's (CALLERS.md 3, accounts:read): a key holding network:ping
    alone learns that the service is suspended and what to offer, not what is owed; a key
    holding both gets the figures, on REST as on the account route."""
    dataset = build_dataset()
    named = next(row for row in dataset["clients"] if row["id_servicio"] == 102)
    named["plan_internet"] = {"id": 2, "nombre": "PLAN 10MB"}  # for the MCP verify below
    sim = start_simulator(data_file=data_file_of(tmp_path / "up.json", dataset), ping_duration=0.2)
    ping_only, both = generate_key(), generate_key()
    path = tmp_path / "keys.json"
    write_key_entries(
        path,
        [
            new_entry(ping_only, "ping-bot", ["network:ping"], None),
            new_entry(both, "money-bot", ["network:ping", "accounts:read"], None),
        ],
    )
    gw = start_gateway(sim.url, API_KEYS_FILE=str(path), **GATEWAY_SETTINGS)
    warm(gw, sim)
    client = customer(gw, 102)
    facts = {"name": client["name"], "address": client["address"], "plan_name": "PLAN 10MB"}
    url = "/api/v1/clients/102/diagnose"
    seen = gw.client.post(url, params={"wait": 5}, headers={"X-API-Key": ping_only})
    assert seen.status_code == 200, seen.text
    body = seen.json()
    assert (body["action"], body["data"]["next_step"]) == ("service_suspended", "promise")
    assert not {"balance", "total_due", "pending_invoices"} & set(body["data"])
    account = gw.client.get("/api/v1/clients/102/account", headers={"X-API-Key": ping_only})
    assert account.status_code == 403
    full = gw.client.post(url, params={"wait": 5}, headers={"X-API-Key": both}).json()["data"]
    assert (full["balance"], full["total_due"]) == (60000.0, 60000.5)
    assert [i["invoice_id"] for i in full["pending_invoices"]] == [9001, 9002]
    # The same through MCP's diagnose_connection, for a key that can verify.
    agent = generate_key()
    scopes = ["clients:verify", "network:ping"]
    write_key_entries(path, [new_entry(agent, "agent", scopes, None)])
    keyed = {"X-API-Key": agent, "X-End-User-Id": "chat-debt"}
    wait_until(lambda: gw.client.post(url, headers=keyed).status_code == 200, timeout=15)
    said = anyio.run(_diagnosed_through_mcp, gw.url, keyed, facts)
    assert (said["action"], said["next_step"]) == ("service_suspended", "promise")
    assert not {"balance", "total_due", "pending_invoices"} & set(said)


async def _diagnosed_through_mcp(
    url: str, headers: dict[str, str], facts: dict[str, Any]
) -> dict[str, Any]:
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        verified = await call(session, "verify_customer", service_id=102, **facts)
        assert "verification_id" in verified.data, verified.texts
        vid = verified.data["verification_id"]
        diagnosed = await call(session, "diagnose_connection", verification_id=vid, wait=0)
    assert not diagnosed.is_error, diagnosed.texts
    return diagnosed.data
