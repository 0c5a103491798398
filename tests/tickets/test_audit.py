"""The `ticket_create` audit (CALLERS.md 4 and 6): a ticket made (or maybe made) is one event,
recorded by the ticket service before the answer; a refusal is counted, one event a caller,
outcome, service, reason and minute with `details.count`; a replayed answer is no new event;
nothing of the request's customer in clear."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tests.conftest import Gateway, Simulator
from tests.tickets.conftest import ticket_body

# A description a caller might well write: a phone, a document and a name in free text.
CHATTY = "Llamar a CLIENTE 301 al 3001234567, cédula 10000301; sin servicio desde ayer"
LEAKS = ("3001234567", "10000301", "CLIENTE", "cédula", "sin servicio")


def audit_events(gw: Gateway) -> list[dict[str, Any]]:
    # The memory store's log is plain data: read it from the test's thread.
    events = asyncio.run(gw.runtime.audit.query(event="ticket_create", limit=500))
    return list(reversed(events))  # oldest first


def test_each_creation_outcome_is_one_event(gw: Gateway, sim: Simulator) -> None:
    key = {"Idempotency-Key": "audit-created-1"}
    body = ticket_body(zone_id=3, service_id=301, description=CHATTY)
    created = gw.post("/api/v1/tickets", json=body, headers=key)
    assert created.status_code == 201, created.text
    ticket_id = created.json()["data"]["ticket_id"]
    # The same key again: the first answer, replayed, and no second event.
    replay = gw.post("/api/v1/tickets", json=body, headers=key)
    assert replay.headers["Idempotent-Replayed"] == "true"
    # The same service and subject again, without the key (a loop of the same call).
    duplicate = gw.post("/api/v1/tickets", json=body)
    assert duplicate.json()["action"] == "ticket_already_open"
    # Zone 2 is full; its refusal replayed for the key is no new event either.
    full = {"Idempotency-Key": "audit-full-1"}
    for _ in range(2):
        refused = gw.post(
            "/api/v1/tickets", json=ticket_body(zone_id=2, service_id=201), headers=full
        )
        assert refused.json()["action"] == "zone_ticket_limit_reached"
    # Another zone named for service 201 (in zone 2).
    mismatch = gw.post("/api/v1/tickets", json=ticket_body(zone_id=3, service_id=201))
    assert mismatch.json()["action"] == "zone_mismatch"
    # The backend refuses the technician (a 400 naming the field).
    failed = gw.post(
        "/api/v1/tickets",
        json=ticket_body(zone_id=3, service_id=302, technician_id=999, description=CHATTY),
    )
    assert (failed.status_code, failed.json()["action"]) == (400, "ticket_creation_failed")
    # A subject outside the catalogue (the caller's words are not audited).
    unknown = gw.post(
        "/api/v1/tickets", json=ticket_body(zone_id=3, service_id=302, subject=CHATTY[:40])
    )
    assert (unknown.status_code, unknown.json()["action"]) == (400, "ticket_creation_failed")
    # Not a creation outcome: an unknown service, a key reused with another body.
    assert gw.post("/api/v1/tickets", json=ticket_body(service_id=999_999)).status_code == 404
    reused = gw.post("/api/v1/tickets", json=ticket_body(zone_id=3, service_id=302), headers=key)
    assert reused.json()["action"] == "idempotency_key_reused"

    events = audit_events(gw)
    assert [(e["outcome"], e["service_id"]) for e in events] == [
        ("created", 301),
        ("duplicate", 301),
        ("zone_limit", 201),
        ("zone_mismatch", 201),
        ("failed", 302),
        ("failed", 302),
    ]
    assert events[-1]["details"] == {"zone_id": 3, "reason": "unknown_subject", "count": 1}
    # Made: one by one; refused: counted (a loop of them cannot push the writes out).
    assert ["count" in e["details"] for e in events] == [False, True, True, True, True, True]
    by_outcome = {e["outcome"]: e for e in events[:-1]}
    assert by_outcome["created"]["details"]["ticket_id"] == ticket_id
    assert by_outcome["duplicate"]["details"]["ticket_id"] == ticket_id
    assert by_outcome["zone_limit"]["details"]["active_tickets"] == 3
    assert by_outcome["zone_mismatch"]["details"]["record_zone_id"] == 2
    assert by_outcome["failed"]["details"]["reason"] == "upstream_rejected"
    assert by_outcome["created"]["details"]["subject"] == "No Tiene Internet"
    for event in events:
        assert event["caller"] == "jwt:bot"
        assert event["request_id"]
    text = json.dumps(events, ensure_ascii=False)
    for leak in LEAKS:
        assert leak not in text, leak
