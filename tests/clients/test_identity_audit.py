"""CALLERS.md 4: verify, resolve and the update record their audit events where the outcome
is decided (`verified` / `failed` / `locked`; `updated` / `failed` with the names of the
fields), and no name, address, document or phone of the run is ever kept in clear."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.clients.conftest import StartPair
from tests.clients.test_verify_update import GOOD
from tests.conftest import Gateway

# Values of the crafted record 101 and of the requests below: none may be audited in clear.
SECRETS = [
    "JUAN",
    "Juan",
    "PÉREZ",
    "Perez",
    "ROSAL",
    "Rosal",
    "12345678",
    "3001234567",
    "3109876543",
    "A9988776",
    "3112223344",
    "311 222 3344",
    "Nadie",
    "Inventada",
]


def events(gw: Gateway, event: str) -> list[dict[str, Any]]:
    """The audit's events of one kind, oldest first, read on the gateway's own loop."""
    loop = gw.runtime.services.clients.cache._periodic.get_loop()
    query = gw.runtime.audit.query(event=event, limit=500)
    found: list[dict[str, Any]] = asyncio.run_coroutine_threadsafe(query, loop).result(10)
    return list(reversed(found))


def assert_nothing_in_clear(found: list[dict[str, Any]]) -> None:
    text = json.dumps(found, ensure_ascii=False)
    for value in SECRETS:
        assert value not in text, value


def test_verify_records_verified_failed_and_locked(start_pair: StartPair) -> None:
    _, gw = start_pair(VERIFY_MAX_FAILURES=2)
    url = "/api/v1/clients/101/verify"
    assert gw.post(url, json=GOOD).json()["action"] == "client_verified"
    wrong = {**GOOD, "name": "Nadie Inventada"}
    for _ in range(2):
        assert gw.post(url, json=wrong).json()["action"] == "client_verification_failed"
    assert gw.post(url, json=wrong).status_code == 429
    assert gw.post("/api/v1/clients/999999/verify", json=GOOD).status_code == 404

    found = events(gw, "verify")
    outcomes = [(e["outcome"], e["service_id"], e["details"].get("reason")) for e in found]
    assert outcomes == [
        ("verified", 101, None),
        ("failed", 101, "mismatch"),
        ("failed", 101, "mismatch"),
        ("locked", 101, None),
        # No such service: no comparison, nothing counted against anyone, so counted in the
        # audit rather than kept (CALLERS.md 6), and naming no service (there is none).
        ("failed", None, "client_not_found"),
    ]
    assert found[-1]["details"]["count"] == 1
    assert found[0]["details"]["matched_fields"] == [
        "name",
        "address",
        "internet_plan_name",
        "internet_plan_price",
    ]
    assert "name" not in found[1]["details"]["matched_fields"]
    assert all(e["caller"] and e["request_id"] for e in found)
    assert_nothing_in_clear(found)


def test_resolve_records_verified_failed_and_locked(start_pair: StartPair) -> None:
    _, gw = start_pair(VERIFY_END_USER_MAX_FAILURES=2)
    url = "/api/v1/clients/resolve"
    assert gw.post(url, json=GOOD).json()["action"] == "client_verified"
    # Words naming no one, then a known name with a wrong address: two failures.
    assert gw.post(url, json={**GOOD, "name": "Nadie Inventada"}).status_code == 404
    assert gw.post(url, json={**GOOD, "address": "Calle Inventada"}).status_code == 404
    # The end user's counter is full: locked, on any words.
    assert gw.post(url, json=GOOD).status_code == 429

    found = events(gw, "resolve")
    outcomes = [(e["outcome"], e["service_id"], e["details"].get("reason")) for e in found]
    assert outcomes == [
        ("verified", 101, None),
        ("failed", None, "client_not_found"),
        ("failed", None, "mismatch"),
        ("locked", None, None),
    ]
    assert_nothing_in_clear(found)


def test_update_records_updated_and_failed_with_field_names_only(start_pair: StartPair) -> None:
    sim, gw = start_pair()
    new = {"document": "A9988776", "phone": "+57 311 222 3344"}
    assert gw.put("/api/v1/clients/101", json=new).status_code == 200
    assert gw.put("/api/v1/clients/101", json={"phone": "311-ABC"}).status_code == 400
    sim.state.faults.update({"garbage": 1.0, "method": "PATCH"})
    assert gw.put("/api/v1/clients/101", json={"document": "A9988776"}).status_code == 500

    found = events(gw, "client_update")
    assert [(e["outcome"], e["service_id"], e["details"]) for e in found] == [
        ("updated", 101, {"fields": ["document", "phone"]}),
        # Refused before the write: counted (CALLERS.md 6); the write the backend failed: kept.
        ("failed", 101, {"fields": ["phone"], "reason": "invalid_phone", "count": 1}),
        ("failed", 101, {"fields": ["document"], "reason": "client_update_failed"}),
    ]
    assert_nothing_in_clear(found)
