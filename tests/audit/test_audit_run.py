"""Issue 19: the audit of a whole run (CALLERS.md 4) holds every kind of event, each recorded
by whoever decided it, read back through GET /api/v1/audit, and nothing in it (nor in the
audit's log lines) names, locates or identifies the customer, nor carries a secret."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from isp_gateway.audit import EVENTS
from isp_gateway.auth.keys import generate_key, new_entry, write_key_entries
from tests.agents.conftest import call, mcp_session, pick_customer
from tests.audit.test_audit import EVENT_FIELDS
from tests.conftest import PASSWORD, USERNAME, Gateway, Simulator
from tests.support import emptied_redis

# Every event the audit declares: one the run below does not produce fails the test.
EVERY_EVENT = set(EVENTS)
NEW_PHONE = "3209998877"
REDIS_DB = 8


def _audit(gw: Gateway) -> list[dict[str, Any]]:
    response = gw.get("/api/v1/audit", params={"limit": 500})
    assert response.status_code == 200, response.text
    assert response.json()["action"] == "audit_listed"
    events: list[dict[str, Any]] = response.json()["data"]
    return events


def test_the_audit_of_a_run_holds_every_event_and_no_personal_data(
    start_simulator: Any,
    start_gateway: Any,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    redis_url: Callable[[int], str],
) -> None:
    # On Redis, as replicas keep it: the events go to the capped stream the audit route reads.
    shared = redis_url(REDIS_DB)
    caplog.set_level(logging.INFO, logger="isp_gateway.audit")
    key = generate_key()
    keys_file = tmp_path / "keys.json"
    write_key_entries(keys_file, [new_entry(key, "portal", ["clients:read"], None)])
    sim: Simulator = start_simulator()
    with emptied_redis(shared):
        gw: Gateway = start_gateway(sim.url, API_KEYS_FILE=str(keys_file), REDIS_URL=shared)
        _run_and_check(gw, key, caplog)


def _run_and_check(gw: Gateway, key: str, caplog: pytest.LogCaptureFixture) -> None:
    client = pick_customer(gw)
    sid = client["service_id"]
    # Everything a run would reveal of the person if it leaked, and the secrets.
    private = [
        client["name"],
        client["address"],
        client["document"],
        *client["phone"].split(","),
        NEW_PHONE,
        PASSWORD,
        key,
    ]

    auth = gw.url + "/api/v1/auth/token"
    assert httpx.post(auth, data={"username": USERNAME, "password": PASSWORD}).is_success
    assert httpx.post(auth, data={"username": USERNAME, "password": "not it"}).status_code == 401
    wrong = {
        "name": "Nombre Inventado",
        "address": "Calle Inventada 1",
        "internet_plan_name": client["internet_plan_name"],
    }
    right = {
        "name": client["name"],
        "address": client["address"],
        "internet_plan_name": client["internet_plan_name"],
    }
    assert gw.post(f"/api/v1/clients/{sid}/verify", json=wrong).json()["action"] == (
        "client_verification_failed"
    )
    assert gw.post(f"/api/v1/clients/{sid}/verify", json=right).json()["action"] == (
        "client_verified"
    )
    gw.post("/api/v1/clients/resolve", json=wrong)
    assert gw.put(f"/api/v1/clients/{sid}", json={"phone": NEW_PHONE}).is_success
    ticket = {
        "service_id": sid,
        "subject": "No Tiene Internet",
        "description": f"{client['name']} llama desde {NEW_PHONE}",
        "technician_id": client["technician_id"],
        "zone_id": client["zone_id"],
    }
    created = gw.post("/api/v1/tickets", json=ticket)
    assert created.status_code in (201, 409), created.text
    assert gw.post(f"/api/v1/{sid}/ping/", json={"pings": 4}).is_success
    assert gw.post(f"/api/v1/clients/{sid}/diagnose", params={"wait": 0}).is_success
    # A key without the scope, and an agent acting before verifying.
    refused = gw.client.get("/api/v1/audit", headers={"X-API-Key": key})
    assert refused.status_code == 403

    async def agent() -> None:
        async with mcp_session(gw) as session:
            assert (await call(session, "customer_account", verification_id="ver_x")).is_error

    asyncio.run(agent())

    events = _audit(gw)
    assert {e["event"] for e in events} >= EVERY_EVENT, sorted({e["event"] for e in events})
    for event in events:
        assert set(event) >= EVENT_FIELDS
    text = json.dumps(events, ensure_ascii=False)
    lines = "\n".join(r.getMessage() for r in caplog.records if r.name == "isp_gateway.audit")
    assert lines
    for value in private:
        assert value not in text, value
        assert value not in lines, value
