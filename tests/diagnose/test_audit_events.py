"""Audit events of pings and diagnose (CALLERS.md 4): one per decided answer, its action as
the outcome, the caller and end user of the request, no customer data in clear. Kept one by
one when the backend started a ping task for it; counted otherwise (CALLERS.md 6: free to
repeat), per service, or per caller alone for a service that does not exist."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from tests.conftest import Gateway, Simulator, StartGateway
from tests.diagnose.conftest import GATEWAY_SETTINGS, warm

END_USER = "chat-7f3a9c"


def events(gw: Gateway, event: str | None = None) -> list[dict[str, Any]]:
    """The gateway's audit, oldest first."""
    found = asyncio.run(gw.runtime.audit.query(event=event, limit=500))
    return list(reversed(found))


def outcomes(gw: Gateway, event: str) -> list[tuple[Any, str]]:
    return [(e["service_id"], e["outcome"]) for e in events(gw, event)]


def customer_data(sim: Simulator, service_id: int) -> list[str]:
    row = next(c for c in sim.state.dataset.clients if c["id_servicio"] == service_id)
    return [row["cedula"], row["telefono"], row["nombre"], row["direccion"], row["usuario"]]


def assert_no_customer_data(gw: Gateway, sim: Simulator, *service_ids: int) -> None:
    text = json.dumps(events(gw), ensure_ascii=False)
    for service_id in service_ids:
        for value in customer_data(sim, service_id):
            assert value not in text, value


def diagnose(gw: Gateway, service_id: int | str, **params: Any) -> Any:
    params.setdefault("wait", 10)
    headers = {"X-End-User-Id": END_USER}
    return gw.post(f"/api/v1/clients/{service_id}/diagnose", params=params, headers=headers)


def test_a_ping_is_audited_when_created_and_once_when_decided(gw: Gateway, sim: Simulator) -> None:
    sim.state.set_ping_outcome(101, "all_replies")
    warm(gw, sim)
    created = gw.post("/api/v1/101/ping/", json={"pings": 4}, headers={"X-End-User-Id": END_USER})
    task_id = created.json()["data"]["task_id"]
    assert outcomes(gw, "ping") == [(101, "ping_created")]
    final = gw.get(f"/api/v1/ping/{task_id}/", params={"wait": 10}).json()
    assert final["action"] == "stable_connection"
    # A loop of polls of a decided task adds nothing: the result was decided once.
    for _ in range(5):
        assert gw.get(f"/api/v1/ping/{task_id}/").json()["action"] == "stable_connection"
    assert outcomes(gw, "ping") == [(101, "ping_created"), (101, "stable_connection")]
    first = events(gw, "ping")[0]
    assert first["caller"] == "jwt:bot" and first["end_user"] == END_USER
    assert first["details"] == {} and first["request_id"]
    # Refused: an unknown service, counted with the answer's action and no service (there
    # is none: a loop over made-up ids adds one event a minute, not one an id).
    assert gw.post("/api/v1/999999/ping/", json={"pings": 4}).status_code == 404
    assert outcomes(gw, "ping")[-1] == (None, "client_not_found")
    assert events(gw, "ping")[-1]["details"] == {"count": 1}
    assert_no_customer_data(gw, sim, 101)


def test_every_diagnose_answer_is_audited_with_its_action(gw: Gateway, sim: Simulator) -> None:
    sim.state.set_ping_outcome(101, "all_replies")
    warm(gw, sim)
    expected = {
        101: "stable_connection",
        102: "service_suspended",
        103: "service_cancelled",
        106: "service_suspended",
    }
    for service_id, action in expected.items():
        body = diagnose(gw, service_id).json()
        assert body["action"] == action, body
    assert diagnose(gw, 999999).status_code == 404
    assert outcomes(gw, "diagnose") == [*expected.items(), (None, "client_not_found")]
    assert {e["end_user"] for e in events(gw, "diagnose")} == {END_USER}
    # Kept one by one: the diagnose that had the backend start a ping. Counted: the answers
    # from what the gateway held (the states) and the unknown service.
    assert [e["details"].get("count") for e in events(gw, "diagnose")] == [None, 1, 1, 1, 1]
    # The diagnose of 101 pinged: its ping's own events are there too.
    assert outcomes(gw, "ping") == [(101, "ping_created"), (101, "stable_connection")]
    assert_no_customer_data(gw, sim, *CLIENT_IDS)


CLIENT_IDS = (101, 102, 103, 106)


def test_a_failed_upstream_check_is_audited_with_the_error(gw_outage_checks_fail: Gateway) -> None:
    gw = gw_outage_checks_fail
    assert diagnose(gw, 101).status_code == 502
    assert outcomes(gw, "diagnose") == [(101, "upstream_unavailable")]
    assert events(gw, "ping") == []


def test_audit_off_records_nothing(sim: Simulator, start_gateway: StartGateway) -> None:
    gw = start_gateway(sim.url, AUDIT_ENABLED=False, **GATEWAY_SETTINGS)
    warm(gw, sim)
    assert diagnose(gw, 103).json()["action"] == "service_cancelled"
    assert gw.post("/api/v1/101/ping/", json={"pings": 4}).status_code == 200
    time.sleep(0.1)  # real time for an event that must NOT be recorded
    assert events(gw) == []


def test_a_ping_the_backend_answers_with_garbage_is_audited_as_answered(
    gw: Gateway, sim: Simulator
) -> None:
    warm(gw, sim)
    sim.state.faults.update({"garbage": 1.0, "method": "POST", "path_prefix": "/api/clientes/"})
    response = gw.post("/api/v1/101/ping/", json={"pings": 4})
    assert response.status_code == 502
    action = response.json()["action"]
    assert action in ("ping_failed", "upstream_unavailable")
    # The diagnose of the same line says the ping was refused, and both are audited so.
    body = diagnose(gw, 101).json()
    assert outcomes(gw, "diagnose") == [(101, body["action"])]
    assert outcomes(gw, "ping")[0] == (101, action)


def test_a_ping_the_backend_fails_is_audited_with_the_error(gw: Gateway, sim: Simulator) -> None:
    warm(gw, sim)
    sim.state.faults.update({"error_rate": 1.0, "method": "POST", "path_prefix": "/api/clientes/"})
    response = gw.post("/api/v1/101/ping/", json={"pings": 4})
    assert response.status_code == 502
    assert outcomes(gw, "ping") == [(101, response.json()["action"])]
