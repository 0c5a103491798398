"""Verify, resolve and update over loopback against the simulator."""

from __future__ import annotations

from typing import Any

import pytest

from tests.clients.conftest import StartPair, assert_fields, body, calls, envelope
from tests.conftest import Gateway, Pair

GOOD = {
    "name": "Juan Perez",
    "address": "Vereda el Rosal",
    "internet_plan_name": "plan 10mb",
    "internet_plan_price": 40000.5,
}


def verify(gw: Gateway, service_id: int, payload: dict[str, Any]) -> Any:
    return gw.post(f"/api/v1/clients/{service_id}/verify", json=payload)


def test_verify_success(pair: Pair) -> None:
    _, gw = pair
    response = verify(gw, 101, GOOD)
    out = envelope(response, 200)
    assert (out["ok"], out["type"], out["action"]) == (True, "success", "client_verified")
    # CALLERS.md 5, round 4: `verification_id` is added whatever the policy; the spec's
    # fields are unchanged.
    assert out["data"].pop("verification_id").startswith("ver_")
    assert out["data"] == {
        "is_valid": True,
        "matched_fields": ["name", "address", "internet_plan_name", "internet_plan_price"],
    }
    assert out["message"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", "Jua"),  # a fragment of a token is not a match
        ("name", "a"),
        ("name", "Juan Pereira"),
        ("address", "El Rosales"),
        ("address", "VDA/"),  # only a prefix: no token left
        ("internet_plan_name", "PLAN 20MB"),
        ("internet_plan_price", 40001.5),  # outside ±1.0
    ],
)
def test_verify_mismatch(pair: Pair, field: str, value: Any) -> None:
    _, gw = pair
    response = verify(gw, 101, {**GOOD, field: value})
    out = envelope(response, 200)
    assert (out["ok"], out["action"]) == (True, "client_verification_failed")
    assert out["data"]["is_valid"] is False
    assert field not in out["data"]["matched_fields"]
    assert len(out["data"]["matched_fields"]) == 3
    assert out["data"]["debug"] == {
        "client_address": "VDA/ EL ROSAL CASA 4",
        "client_plan_name": "PLAN 10MB",
        "resolved_plan_price": 40000.0,
    }


def test_verify_matching_rules(pair: Pair) -> None:
    _, gw = pair
    ok = {
        "name": "JOSÉ  pérez",
        "address": "barrio   calle 5",
        "internet_plan_name": "10MB",
    }
    assert body(verify(gw, 107, ok))["action"] == "client_verified"
    # Prefixes on the record side too: "B/ LOS PINOS" vs "Barrio Los Pinos".
    maria = {"name": "maria jose", "address": "Barrio Los Pinos", "internet_plan_price": 39999}
    assert body(verify(gw, 102, maria))["action"] == "client_verified"


def test_verify_needs_three_fields_before_any_upstream_call(pair: Pair) -> None:
    sim, gw = pair
    for payload in (
        {"name": "Juan Perez", "address": "El Rosal"},
        {"name": "Juan Perez", "address": "El Rosal", "internet_plan_name": "  "},
        {"name": "Juan Perez", "address": "El Rosal", "internet_plan_price": None},
        {},
    ):
        response = verify(gw, 4040, payload)
        out = envelope(response, 400)
        assert_fields(out, ok=False, type="error", action="client_verification_failed", data=None)
        assert "3" in out["message"]
    assert calls(sim) == 0


def test_verify_unknown_client_is_404(pair: Pair) -> None:
    _, gw = pair
    response = verify(gw, 4040, GOOD)
    out = envelope(response, 404)
    assert (out["ok"], out["action"], out["data"]) == (False, "client_not_found", None)


def test_verify_bad_body_is_422(pair: Pair) -> None:
    _, gw = pair
    response = verify(gw, 101, {**GOOD, "internet_plan_price": "cheap"})
    assert response.status_code == 422
    assert body(response)["action"] == "validation_error"


def test_verify_failures_lock_the_service_id(start_pair: StartPair) -> None:
    _, gw = start_pair(VERIFY_MAX_FAILURES=2, VERIFY_LOCKOUT_SECONDS=60)
    wrong = {**GOOD, "name": "Pedro"}
    assert body(verify(gw, 101, GOOD))["action"] == "client_verified"
    for _ in range(2):
        assert body(verify(gw, 101, wrong))["action"] == "client_verification_failed"
    locked = verify(gw, 101, GOOD)
    out = envelope(locked, 429)
    assert (out["ok"], out["action"]) == (False, "client_verification_locked")
    assert 0 < int(locked.headers["Retry-After"]) <= 60
    # Another service id is not locked.
    assert (
        body(
            verify(
                gw,
                107,
                {"name": "jose perez", "address": "calle 5", "internet_plan_name": "plan 10mb"},
            )
        )["action"]
        == "client_verified"
    )


def test_verify_success_resets_the_failures(start_pair: StartPair) -> None:
    _, gw = start_pair(VERIFY_MAX_FAILURES=2)
    wrong = {**GOOD, "name": "Pedro"}
    assert body(verify(gw, 101, wrong))["action"] == "client_verification_failed"
    assert body(verify(gw, 101, GOOD))["action"] == "client_verified"
    assert body(verify(gw, 101, wrong))["action"] == "client_verification_failed"
    assert verify(gw, 101, GOOD).status_code == 200


def test_verify_price_from_plans_when_record_has_none(pair: Pair) -> None:
    # Needs PlanService.price_for (plans issue): ANA's record has precio_plan "".
    _, gw = pair
    payload = {"name": "Ana Torres", "address": "Santa Rosa", "internet_plan_price": 35000}
    out = body(verify(gw, 103, payload))
    assert out["action"] == "client_verified", out


# -- resolve --------------------------------------------------------------------------


def resolve(gw: Gateway, payload: dict[str, Any]) -> Any:
    return gw.post("/api/v1/clients/resolve", json=payload)


def test_resolve_success(pair: Pair) -> None:
    sim, gw = pair
    response = resolve(gw, GOOD)
    out = envelope(response, 200)
    assert (out["ok"], out["action"]) == (True, "client_verified")
    assert out["data"]["service_id"] == 101 and out["data"]["document"] == "12345678"
    assert calls(sim) == 0


def test_resolve_by_address_when_no_name(pair: Pair) -> None:
    _, gw = pair
    payload = {"address": "Barrio Los Pinos", "internet_plan_name": "PLAN 10MB",
               "internet_plan_price": 40000}  # fmt: skip
    out = body(resolve(gw, payload))
    assert out["action"] == "client_verified" and out["data"]["service_id"] == 102


def test_resolve_ambiguous_is_409(pair: Pair) -> None:
    _, gw = pair
    payload = {"name": "Rosa Diaz", "address": "El Porvenir", "internet_plan_name": "plan 10mb"}
    response = resolve(gw, payload)
    out = envelope(response, 409)
    assert (out["ok"], out["action"], out["data"]) == (False, "client_ambiguous", None)


def test_resolve_no_candidate_and_no_full_match(pair: Pair) -> None:
    _, gw = pair
    none = resolve(gw, {**GOOD, "name": "Pedro Picapiedra"})
    assert none.status_code == 404 and body(none)["action"] == "client_not_found"
    partial = resolve(gw, {**GOOD, "internet_plan_name": "PLAN 5MB"})
    assert partial.status_code == 404
    assert body(partial)["action"] == "client_verification_failed"
    few = resolve(gw, {"name": "Juan Perez", "address": "El Rosal"})
    assert few.status_code == 400 and body(few)["action"] == "client_verification_failed"


def test_resolve_failures_are_throttled_per_end_user(start_pair: StartPair) -> None:
    # CALLERS.md 2 (changes the per-name count): resolve failures count on the end user's
    # counter, whatever the name; without X-End-User-Id the end user is the caller.
    _, gw = start_pair(VERIFY_END_USER_MAX_FAILURES=2)
    wrong = {**GOOD, "internet_plan_name": "PLAN 5MB"}
    for _ in range(2):
        assert resolve(gw, wrong).status_code == 404
    locked = resolve(gw, {**GOOD, "name": "JUAN  PÉREZ"})  # the same name, normalised
    assert locked.status_code == 429
    assert body(locked)["action"] == "client_verification_locked"
    jose = {"name": "jose perez", "address": "calle 5", "internet_plan_name": "10mb"}
    assert resolve(gw, jose).status_code == 429  # another name: the same person
    other = gw.post("/api/v1/clients/resolve", json=jose, headers={"X-End-User-Id": "chat-2"})
    assert other.status_code == 200


# -- update ---------------------------------------------------------------------------


def test_update_patches_upstream_and_cache(pair: Pair) -> None:
    sim, gw = pair
    response = gw.put(
        "/api/v1/clients/101", json={"document": "A9988776", "phone": "+57 311 222 3344"}
    )
    out = envelope(response, 200)
    assert (out["ok"], out["action"], out["data"]) == (True, "client_updated", None)
    assert calls(sim, "PATCH /api/clientes/{id}/perfil/") == 1
    # CALLERS.md 2: the phone field is read fresh first, and its second number stays.
    assert calls(sim) == 1
    sim.state.reset_stats()
    stored = next(c for c in sim.state.dataset.clients if c["id_servicio"] == 101)
    assert (stored["cedula"], stored["telefono"]) == ("A9988776", "3112223344,3109876543")
    # The next lookups see the new values at once, from the cache.
    found = body(gw.get("/api/v1/clients/by-document/A9988776"))["data"]
    assert found["service_id"] == 101 and found["phone"] == "3112223344,3109876543"
    assert body(gw.get("/api/v1/clients/by-phone/3112223344"))["data"]["service_id"] == 101
    assert gw.get("/api/v1/clients/by-document/12345678").status_code != 200
    assert (
        body(gw.get("/api/v1/clients/search", params={"q": "a9988776"}))["data"][0]["service_id"]
        == 101
    )
    assert calls(sim) == 1  # only the (now remembered) miss for the old document


def test_update_only_one_field(pair: Pair) -> None:
    _sim, gw = pair
    assert gw.put("/api/v1/clients/102", json={"phone": "3000000001"}).status_code == 200
    found = body(gw.get("/api/v1/clients/by-service-id/102"))["data"]
    assert (found["document"], found["phone"]) == ("87654321", "3000000001")


def test_update_clears_a_remembered_miss(pair: Pair) -> None:
    _, gw = pair
    assert gw.get("/api/v1/clients/by-document/55554444").status_code == 404
    assert gw.put("/api/v1/clients/105", json={"document": "55554444"}).status_code == 200
    assert gw.get("/api/v1/clients/by-document/55554444").status_code == 200


@pytest.mark.parametrize(
    ("payload", "action"),
    [
        ({}, "client_update_failed"),
        ({"document": None, "phone": None}, "client_update_failed"),
        ({"document": "  ", "phone": ""}, "client_update_failed"),
        ({"document": "12.345.678"}, "invalid_document"),
        ({"phone": "12-34"}, "invalid_phone"),
    ],
)
def test_update_invalid_is_400(pair: Pair, payload: dict[str, Any], action: str) -> None:
    sim, gw = pair
    response = gw.put("/api/v1/clients/101", json=payload)
    assert response.status_code == 400
    assert body(response)["action"] == action
    assert calls(sim, "PATCH /api/clientes/{id}/perfil/") == 0


def test_update_unknown_client_is_404(pair: Pair) -> None:
    _, gw = pair
    response = gw.put("/api/v1/clients/4040", json={"document": "12345"})
    assert response.status_code == 404 and body(response)["action"] == "client_not_found"


@pytest.mark.parametrize("faults", [{"error_rate": 1.0}, {"garbage": 0.0, "hang_rate": 1.0}])
def test_update_upstream_failure_is_500(start_pair: StartPair, faults: dict[str, Any]) -> None:
    sim, gw = start_pair(UPSTREAM_TIMEOUT_SECONDS=0.5)
    sim.state.faults.update({**faults, "method": "PATCH"})
    response = gw.put("/api/v1/clients/101", json={"document": "12345"})
    out = envelope(response, 500)
    assert (out["ok"], out["action"], out["data"]) == (False, "client_update_failed", None)
    # The cache keeps the old value: the write did not go through.
    assert gw.get("/api/v1/clients/by-document/12345678").status_code == 200


@pytest.mark.parametrize(
    "faults",
    [
        {"unreadable_write": True},  # 200 with an HTML page, the write not carried out
        {"garbage": 1.0, "method": "PATCH"},  # 200 with a body that is not JSON
    ],
)
def test_an_unreadable_200_is_not_an_update(start_pair: StartPair, faults: dict[str, Any]) -> None:
    """Issue 17: a PATCH answered 200 with an unreadable body gave `client_updated`, and the
    cache was patched with a phone the backend never got."""
    sim, gw = start_pair()
    before = body(gw.get("/api/v1/clients/by-service-id/102"))["data"]
    sim.state.faults.update(faults)
    for _ in range(3):
        response = gw.put("/api/v1/clients/102", json={"phone": "3000000001"})
        out = envelope(response, 500)
        assert (out["ok"], out["action"], out["data"]) == (False, "client_update_failed", None)
    sim.state.faults.reset()
    stored = next(c for c in sim.state.dataset.clients if c["id_servicio"] == 102)
    assert stored["telefono"] != "3000000001"
    # Nothing in the caches changed: the old phone still finds the client, the new one not.
    assert body(gw.get("/api/v1/clients/by-service-id/102"))["data"] == before
    assert gw.get(f"/api/v1/clients/by-phone/{before['phone']}").status_code == 200
    assert gw.get("/api/v1/clients/by-phone/3000000001").status_code == 404


# -- the plan price from the plans source ---------------------------------------------

ANA = {"name": "Ana Torres", "address": "Santa Rosa", "internet_plan_price": 35000}
DETAIL = "GET /api/plan-internet/queue/{id}/"


def test_price_comes_from_the_record_when_filled(start_pair: StartPair) -> None:
    from isp_gateway.simulator import Variants

    sim, gw = start_pair({"variants": Variants(precio_plan="real")})
    assert body(verify(gw, 103, ANA))["action"] == "client_verified"
    assert calls(sim, DETAIL) == 0


def test_price_from_the_plan_detail_once(pair: Pair) -> None:
    sim, gw = pair
    assert body(verify(gw, 103, ANA))["action"] == "client_verified"
    wrong = body(verify(gw, 103, {**ANA, "internet_plan_price": 30000}))
    assert wrong["data"]["debug"]["resolved_plan_price"] == 35000.0
    assert body(resolve(gw, ANA))["data"]["service_id"] == 103
    assert calls(sim, DETAIL) == 1  # the plan detail is cached


@pytest.mark.parametrize(
    ("faults", "status", "action"),
    [
        ({"error_rate": 1.0}, 502, "upstream_unavailable"),
        ({"force_403": True}, 502, "CLIENT_NOT_FOUND"),
    ],
)
def test_price_source_failure_is_not_a_mismatch(
    start_pair: StartPair, faults: dict[str, Any], status: int, action: str
) -> None:
    sim, gw = start_pair(VERIFY_MAX_FAILURES=1)
    sim.state.faults.update({**faults, "path_prefix": "/api/plan-internet/"})
    for response in (verify(gw, 103, ANA), resolve(gw, ANA)):
        assert response.status_code == status, response.text
        assert body(response)["action"] == action
    # When another field already fails, the answer does not depend on the price.
    other = body(verify(gw, 104, {**ANA, "name": "Ana Pedraza"}))
    assert other["action"] == "client_verification_failed"
    assert other["data"]["debug"]["resolved_plan_price"] is None
    # Nothing was counted against 103 or the name: both answer once the upstream is back.
    sim.state.faults.reset()
    assert body(verify(gw, 103, ANA))["action"] == "client_verified"
    assert body(resolve(gw, ANA))["data"]["service_id"] == 103


def test_update_with_our_key_refused_is_502_unable_to_fetch(pair: Pair) -> None:
    sim, gw = pair
    sim.state.faults.update({"force_403": True, "method": "PATCH"})
    response = gw.put("/api/v1/clients/101", json={"document": "12345"})
    out = envelope(response, 502)
    assert_fields(
        out, ok=False, action="CLIENT_NOT_FOUND", message="Unable to fetch client data", data=None
    )
    assert "test-upstream-key" not in response.text
    assert gw.get("/api/v1/clients/by-document/12345678").status_code == 200


def test_unknown_service_is_not_a_failed_guess(start_pair: StartPair) -> None:
    _, gw = start_pair(VERIFY_MAX_FAILURES=1, VERIFY_LOCKOUT_SECONDS=60)
    for _ in range(3):
        assert body(verify(gw, 999, GOOD))["action"] == "client_not_found"
    assert body(verify(gw, 101, GOOD))["action"] == "client_verified"


def test_wrong_json_types_are_422(pair: Pair) -> None:
    sim, gw = pair
    # A price may be a text (kit/prices.py: "40000" is read as 40000), but not a boolean.
    for payload in ({**GOOD, "internet_plan_price": True}, {**GOOD, "name": 12345}):
        response = verify(gw, 101, payload)
        assert response.status_code == 422
        assert body(response)["action"] == "validation_error"
    # An integer price is a number: accepted.
    assert body(verify(gw, 101, {**GOOD, "internet_plan_price": 40000}))["action"] in (
        "client_verified",
        "client_verification_failed",
    )
    response = gw.put("/api/v1/clients/101", json={"phone": 3001234567})
    assert response.status_code == 422
    assert calls(sim, "PATCH /api/clientes/{id}/perfil/") == 0
