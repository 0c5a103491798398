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

from isp_gateway.audit.service import EVENTS
from isp_gateway.auth.keys import generate_key, new_entry, write_key_entries
from tests.agents.conftest import call, mcp_session, pick_customer
from tests.audit.test_audit import EVENT_FIELDS
from tests.conftest import PASSWORD, USERNAME, Gateway, Simulator
from tests.payments.conftest import day, pdf_file, report_fields, verification_id
from tests.support import emptied_redis

# Every event the audit declares: one the run below does not produce fails the test. The
# outage notices' own (an outage's flips, a dropped notice) are audited by tests/outages.
EVERY_EVENT = set(EVENTS) - {"outage", "webhook"}
NEW_PHONE = "3209998877"
SLOW_KEY = generate_key()
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
    write_key_entries(
        keys_file,
        [
            new_entry(key, "portal", ["clients:read"], None),
            # CALLERS.md 6: a key past its own rate, counted as `rate_limited`.
            new_entry(SLOW_KEY, "slow", ["plans:read"], 1),
        ],
    )
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
        SLOW_KEY,
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
    # No valid credential (401), and a key past its rate (429): counted too (CALLERS.md 6).
    assert httpx.get(gw.url + "/api/v1/internet-plans/").status_code == 401
    slow = [
        gw.client.get("/api/v1/internet-plans/", headers={"X-API-Key": SLOW_KEY}).status_code
        for _ in range(3)  # a minute's turn between two of them still leaves a 429
    ]
    assert 429 in slow, slow

    async def agent() -> None:
        async with mcp_session(gw) as session:
            assert (await call(session, "customer_account", verification_id="ver_x")).is_error

    asyncio.run(agent())
    private.append(_money(gw))

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


def _money(gw: Gateway) -> str:
    """A payment promise and a payment report (MONEY.md), each by a suspended customer who
    owes, verified first; the report's bank reference, which the audit must never hold."""
    reference = "BANCO-77441288"
    for number, row in enumerate(_debtors(gw)[:2]):
        statement = {
            "name": row["name"],
            "address": row["address"],
            "internet_plan_name": row["internet_plan_name"],
        }
        vid = verification_id(gw, row["service_id"], statement=statement)
        headers = {"X-Verification-Id": vid}
        if number == 0:
            answer = gw.post(
                f"/api/v1/clients/{row['service_id']}/payment-promise",
                json={"until": day(2)},
                headers=headers,
            )
            assert answer.status_code == 201, answer.text
        else:
            answer = gw.post(
                f"/api/v1/clients/{row['service_id']}/payment-reports",
                data=report_fields(reference=reference, payment_method_id=7),
                files={"receipt": ("recibo.pdf", pdf_file(), "application/pdf")},
                headers=headers,
            )
            assert answer.status_code == 202, answer.text
    return reference


def _debtors(gw: Gateway) -> list[dict[str, Any]]:
    """The simulator's suspended customers whose account shows a debt."""
    rows = gw.get("/api/v1/clients/search", params={"q": "a", "limit": 200}).json()["data"]
    found = []
    for row in rows:
        if row["service_state"] != "suspended" or not row["name"] or not row["address"]:
            continue
        account = gw.get(f"/api/v1/clients/{row['service_id']}/account").json()["data"]
        if account and account["total_due"] > 0:
            found.append(row)
    assert len(found) >= 2, "the simulator's data has no two suspended debtors"
    return found
