"""CALLERS.md 6, the identity policy, as a stranger would try it (issue 24): under `spec` a
failed verify's `debug` tells the answer and the next verify with it passes (the spec's
behaviour, kept byte for byte); under `strict` (REQUIRE_VERIFICATION's too, MCP's always)
a failure tells nothing of the record, the public plan counts as one fact beside the name
and the address, and resolve answers ids and a verification_id, never the record."""

from __future__ import annotations

from typing import Any

import pytest

from tests.agents.conftest import call, mcp_session
from tests.clients.conftest import StartPair
from tests.conftest import Gateway, gateway_settings

# Service 101 of the crafted data (tests/clients/conftest.py) as a stranger may not know it.
RECORD = {
    "name": "JUAN CARLOS PÉREZ GÓMEZ",
    "address": "VDA/ EL ROSAL CASA 4",
    "internet_plan_name": "PLAN 10MB",
    "internet_plan_price": 40000.0,
    "document": "12345678",
    "phone": "3001234567",
}
# What a stranger types: a real-sounding name, an invented address, a public plan.
JUNK = {"name": "Nadie Inventado", "address": "Calle Falsa 123", "internet_plan_name": "PLAN 5MB"}
JUNK_MCP = {"name": "Nadie Inventado", "address": "Calle Falsa 123", "plan_name": "PLAN 5MB"}
GOOD = {"name": "Juan Perez", "address": "Vereda el Rosal", "internet_plan_name": "plan 10mb"}
# Values of the record a failed verify must never show under strict.
SECRETS = ["ROSAL", "Rosal", "10MB", "40000", "JUAN", "PÉREZ", "12345678", "3001234567"]


def verify(gw: Gateway, payload: dict[str, Any], service_id: int = 101, **kw: Any) -> Any:
    return gw.post(f"/api/v1/clients/{service_id}/verify", json=payload, **kw)


def resolve(gw: Gateway, payload: dict[str, Any], **kw: Any) -> Any:
    return gw.post("/api/v1/clients/resolve", json=payload, **kw)


def test_spec_keeps_the_specs_debug_and_its_weakness(start_pair: StartPair) -> None:
    """The default policy answers as the spec does: the debug block, and its values verify
    (why `strict` exists). Unchanged from before the policy: it passes on main too."""
    _, gw = start_pair()
    failed = verify(gw, JUNK)
    assert failed.status_code == 200
    out = failed.json()
    assert out["action"] == "client_verification_failed"
    assert out["data"] == {
        "is_valid": False,
        "matched_fields": [],
        "debug": {
            "client_address": RECORD["address"],
            "client_plan_name": RECORD["internet_plan_name"],
            "resolved_plan_price": RECORD["internet_plan_price"],
        },
    }
    debug = out["data"]["debug"]
    told = {
        "address": debug["client_address"],
        "internet_plan_name": debug["client_plan_name"],
        "internet_plan_price": debug["resolved_plan_price"],
    }
    assert verify(gw, told).json()["action"] == "client_verified"


def test_strict_a_failed_verify_tells_nothing_and_guesses_fail(start_pair: StartPair) -> None:
    _, gw = start_pair(IDENTITY_POLICY="strict")
    failed = verify(gw, JUNK)
    assert failed.status_code == 200
    out = failed.json()
    assert out["action"] == "client_verification_failed"
    # Names of what matched and the attempts left: nothing of the record.
    assert out["data"] == {"is_valid": False, "matched_fields": [], "attempts_left": 4}
    for value in SECRETS:
        assert value not in failed.text, value
    # The attack's next step with what is public: every plan of the catalogue, a guessed
    # address. All fail, the last attempt says none is left, and then the pair is locked.
    plans = gw.get("/api/v1/internet-plans/").json()["data"]
    answers = [
        verify(gw, {**GOOD, "address": "Calle Falsa 123", "internet_plan_name": plan["name"]})
        for plan in plans
    ]
    assert [a.json()["action"] for a in answers] == ["client_verification_failed"] * len(plans)
    assert answers[-1].json()["data"]["attempts_left"] == 0
    assert all("debug" not in a.json()["data"] for a in answers)
    assert verify(gw, GOOD).status_code == 429


@pytest.mark.parametrize(
    ("given", "missing"),
    [
        # The plan's name and price are public: together one fact, not two.
        (("name", "internet_plan_name", "internet_plan_price"), ["address"]),
        (("address", "internet_plan_name", "internet_plan_price"), ["name"]),
        (("name", "address"), ["internet_plan_name"]),
        (("internet_plan_name", "internet_plan_price"), ["name", "address"]),
        (("name",), ["address", "internet_plan_name"]),
    ],
)
def test_strict_needs_name_address_and_the_plan(
    start_pair: StartPair, given: tuple[str, ...], missing: list[str]
) -> None:
    _, gw = start_pair(IDENTITY_POLICY="strict")
    payload = {field: RECORD[field] for field in given}
    for answer in (verify(gw, payload), resolve(gw, payload)):
        assert answer.status_code == 400, answer.text
        out = answer.json()
        assert (out["ok"], out["action"]) == (False, "client_verification_failed")
        assert out["data"] == {"missing": missing}
        assert "falta" in out["message"]
    # Refused before any counter: the right facts still verify at once.
    assert verify(gw, GOOD).json()["action"] == "client_verified"


def test_strict_name_address_and_either_plan_fact_verify(start_pair: StartPair) -> None:
    _, gw = start_pair(IDENTITY_POLICY="strict")
    base = {"name": "Juan Perez", "address": "Vereda el Rosal"}
    for plan in ({"internet_plan_name": "plan 10mb"}, {"internet_plan_price": 40000}):
        out = verify(gw, {**base, **plan}).json()
        assert out["action"] == "client_verified", out
        assert out["data"]["verification_id"].startswith("ver_")


def test_require_verification_means_strict_and_closes_the_chain(start_pair: StartPair) -> None:
    """The issue's chain under REQUIRE_VERIFICATION=true: no debug to read, the record's
    address, plan and price (had a stranger got them) are not enough, so no verification_id
    and no PUT of a stranger's phone."""
    _, gw = start_pair(REQUIRE_VERIFICATION=True)
    assert "debug" not in verify(gw, JUNK).json()["data"]
    told = {k: RECORD[k] for k in ("address", "internet_plan_name", "internet_plan_price")}
    refused = verify(gw, told)
    assert refused.status_code == 400 and refused.json()["data"] == {"missing": ["name"]}
    put = gw.put("/api/v1/clients/101", json={"phone": "3209998877"})
    assert (put.status_code, put.json()["action"]) == (403, "verification_required")
    after = gw.get("/api/v1/clients/by-service-id/101").json()["data"]
    assert after["phone"].startswith(RECORD["phone"])


def test_strict_resolve_answers_ids_and_a_verification_never_the_record(
    start_pair: StartPair,
) -> None:
    _, gw = start_pair(IDENTITY_POLICY="strict")
    found = resolve(gw, GOOD)
    assert found.status_code == 200, found.text
    out = found.json()
    assert out["action"] == "client_verified"
    assert set(out["data"]) == {"service_ids", "verification_id"}
    assert out["data"]["service_ids"] == [101]
    for value in SECRETS:
        assert value not in found.text, value
    # The verification reads the record where a verification is asked for.
    vid = out["data"]["verification_id"]
    account = gw.get("/api/v1/clients/101/account", headers={"X-Verification-Id": vid})
    assert account.status_code == 200, account.text
    assert gw.get("/api/v1/clients/101/account").status_code == 403


def test_settings_strict_and_require_verification_imply_each_other(password_hash: str) -> None:
    url = "http://127.0.0.1:9"
    default = gateway_settings(url, password_hash)
    assert (default.IDENTITY_POLICY, default.REQUIRE_VERIFICATION) == ("spec", False)
    for given in ({"IDENTITY_POLICY": "strict"}, {"REQUIRE_VERIFICATION": True}):
        settings = gateway_settings(url, password_hash, **given)
        assert (settings.IDENTITY_POLICY, settings.REQUIRE_VERIFICATION) == ("strict", True)
    # The safer reading wins over a contradiction (.env.example writes both out).
    both = gateway_settings(url, password_hash, IDENTITY_POLICY="spec", REQUIRE_VERIFICATION=True)
    assert (both.IDENTITY_POLICY, both.REQUIRE_VERIFICATION) == ("strict", True)


@pytest.mark.anyio
async def test_mcp_is_always_strict(start_pair: StartPair) -> None:
    _, gw = start_pair()  # REST under spec
    public = {"name": "Juan Perez", "plan_name": "plan 10mb", "plan_price": 40000}
    async with mcp_session(gw) as session:
        refused = await call(session, "verify_customer", service_id=101, **public)
        wrong = await call(session, "verify_customer", service_id=101, **JUNK_MCP)
        verified = await call(
            session, "verify_customer", service_id=101, **public, address="Vereda el Rosal"
        )
    assert refused.is_error
    assert refused.data["error"] == "client_verification_failed"
    assert refused.data["missing"] == ["address"]
    assert "dirección" in refused.sentence
    assert not wrong.is_error and wrong.data == {"verified": False, "attempts_left": 4}
    for value in SECRETS:
        assert value not in wrong.everything(), value
    assert verified.data["verified"] is True
