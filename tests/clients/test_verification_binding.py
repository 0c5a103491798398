"""CALLERS.md 5, REST's opt-in guard: with REQUIRE_VERIFICATION a successful verify adds
`data.verification_id`, and account, a client's tickets, diagnose and PUT need it in
`X-Verification-Id` for that very service, caller and end user (else 403
`verification_required`, audited); without the setting nothing changes."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tests.clients.conftest import StartPair
from tests.clients.test_verify_update import GOOD
from tests.conftest import Gateway

MARIA = {"name": "maria jose", "address": "Barrio Los Pinos", "internet_plan_price": 39999}
ALICE = {"X-End-User-Id": "alice-chat-1"}
BOB = {"X-End-User-Id": "bob-chat-2"}


def guarded(gw: Gateway, service_id: int, headers: dict[str, str]) -> list[httpx.Response]:
    """One call of each guarded route about `service_id`."""
    base = f"/api/v1/clients/{service_id}"
    return [
        gw.get(f"{base}/account", headers=headers),
        gw.get(f"{base}/tickets", headers=headers),
        gw.post(f"{base}/diagnose", params={"wait": 0}, headers=headers),
        gw.put(base, json={"phone": "3209998877"}, headers=headers),
    ]


def verification_id(gw: Gateway, service_id: int, body: dict[str, Any], **headers: str) -> str:
    response = gw.post(f"/api/v1/clients/{service_id}/verify", json=body, headers=headers)
    out = response.json()
    assert out["action"] == "client_verified", out
    vid: str = out["data"]["verification_id"]
    assert vid.startswith("ver_")
    return vid


def refused(response: httpx.Response) -> bool:
    out = response.json()
    return response.status_code == 403 and (out["ok"], out["action"]) == (
        False,
        "verification_required",
    )


def test_off_nothing_changes(start_pair: StartPair) -> None:
    _, gw = start_pair()
    out = gw.post("/api/v1/clients/101/verify", json=GOOD).json()
    assert out["action"] == "client_verified"
    # CALLERS.md 5, round 4: a verify success always carries one (the payment routes need
    # it), but without the setting no route asks for it.
    assert out["data"]["verification_id"].startswith("ver_")
    assert [r.status_code for r in guarded(gw, 101, {})] == [200, 200, 200, 200]
    # A stray header is ignored, not checked.
    assert gw.get("/api/v1/clients/101/account", headers={"X-Verification-Id": "x"}).is_success


@pytest.fixture
def guarded_gw(start_pair: StartPair) -> Gateway:
    _, gw = start_pair(REQUIRE_VERIFICATION=True)
    return gw


def test_no_header_and_forged_ids_are_refused(guarded_gw: Gateway) -> None:
    gw = guarded_gw
    for headers in (
        {},
        {"X-Verification-Id": ""},
        {"X-Verification-Id": "ver_" + "A" * 43},  # well formed, never issued
        {"X-Verification-Id": "not-an-id"},
        {"X-Verification-Id": "ver_" + "A" * 500},
    ):
        assert all(refused(r) for r in guarded(gw, 101, headers)), headers
    # Nothing was changed by the refused PUTs.
    assert gw.get("/api/v1/clients/by-service-id/101").json()["data"]["phone"] == (
        "3001234567,3109876543"
    )


def test_another_services_id_is_refused(guarded_gw: Gateway) -> None:
    gw = guarded_gw
    maria = verification_id(gw, 102, MARIA)
    # Her id opens her service, never 101's.
    assert all(refused(r) for r in guarded(gw, 101, {"X-Verification-Id": maria}))
    assert gw.get("/api/v1/clients/102/account", headers={"X-Verification-Id": maria}).is_success


def test_another_end_users_id_is_refused(guarded_gw: Gateway) -> None:
    gw = guarded_gw
    alice = verification_id(gw, 101, GOOD, **ALICE)
    for headers in ({**BOB, "X-Verification-Id": alice}, {"X-Verification-Id": alice}):
        assert all(refused(r) for r in guarded(gw, 101, headers)), headers
    ok = guarded(gw, 101, {**ALICE, "X-Verification-Id": alice})
    assert [r.status_code for r in ok] == [200, 200, 200, 200]


def test_the_right_id_passes_and_refusals_are_audited(guarded_gw: Gateway) -> None:
    gw = guarded_gw
    vid = verification_id(gw, 101, GOOD)
    responses = guarded(gw, 101, {"X-Verification-Id": vid})
    assert [r.status_code for r in responses] == [200, 200, 200, 200]
    assert responses[3].json()["action"] == "client_updated"
    # A loop of the same call keeps working for the id's lifetime.
    for _ in range(3):
        assert gw.get("/api/v1/clients/101/tickets", headers={"X-Verification-Id": vid}).is_success
    # A bad service id is still the 400 it always was, checked before the guard.
    bad = gw.get("/api/v1/clients/12ab/account", headers={"X-Verification-Id": vid})
    assert (bad.status_code, bad.json()["action"]) == (400, "invalid_service_id")

    assert refused(gw.get("/api/v1/clients/102/account", headers={"X-Verification-Id": vid}))
    loop = gw.runtime.services.clients.cache._periodic.get_loop()
    query = gw.runtime.audit.query(event="verification_required", limit=10)
    events = asyncio.run_coroutine_threadsafe(query, loop).result(10)
    assert [(e["event"], e["outcome"], e["service_id"]) for e in events] == [
        ("verification_required", "refused", 102)
    ]
    assert vid not in str(events)


def test_ticket_creation_needs_a_verification_of_that_service(guarded_gw: Gateway) -> None:
    gw = guarded_gw
    zone = gw.get("/api/v1/clients/by-service-id/101").json()["data"]["zone_id"]
    body = {
        "service_id": 101,
        "subject": "No Tiene Internet",
        "description": "Sin servicio desde ayer",
        "technician_id": 11,
        "zone_id": zone,
    }
    mine = verification_id(gw, 101, GOOD, **ALICE)
    other = verification_id(gw, 102, MARIA, **ALICE)
    for headers in (
        {**ALICE},
        {**ALICE, "X-Verification-Id": other},
        {**BOB, "X-Verification-Id": mine},
    ):
        assert refused(gw.post("/api/v1/tickets", json=body, headers=headers)), headers
    created = gw.post("/api/v1/tickets", json=body, headers={**ALICE, "X-Verification-Id": mine})
    assert created.status_code == 201, created.text
