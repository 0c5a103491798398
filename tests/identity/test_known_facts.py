"""CALLERS.md 6 under `strict`: a name and an address are facts a stranger does not know, so
the words given for them must say who and where (clients/matching.py `fact_known`). Tried
as the issue's hostile caller did, with what every record shares: a first name, `el` or
`la`, `casa`, `sector`, a house number and the word `plan` verified 7 of 9 customers and
read their accounts; they verify none now. The spec's own matching is kept under `spec`."""

from __future__ import annotations

from typing import Any

import pytest

from isp_gateway.clients.matching import fact_known
from tests.agents.conftest import call, mcp_session
from tests.clients.conftest import StartPair

# Service 101 of the crafted data: JUAN CARLOS PÉREZ GÓMEZ, VDA/ EL ROSAL CASA 4, PLAN 10MB.
KNOWN = {"name": "Juan Perez", "address": "Vereda el Rosal", "internet_plan_name": "plan 10mb"}
# What anyone can type: words of most records, and the public catalogue's word "plan".
WEAK = [
    {"name": "juan", "address": "vereda el rosal", "internet_plan_name": "plan"},
    {"name": "juan perez", "address": "el", "internet_plan_name": "plan"},
    {"name": "juan perez", "address": "casa 4", "internet_plan_name": "plan"},
    {"name": "juan perez", "address": "4", "internet_plan_name": "plan"},
    {"name": "de", "address": "vereda el rosal", "internet_plan_name": "plan 10mb"},
]


@pytest.mark.parametrize(
    ("given", "record", "address", "known"),
    [
        ("juan perez", "JUAN CARLOS PÉREZ GÓMEZ", False, True),
        ("Gómez Juan", "JUAN CARLOS PÉREZ GÓMEZ", False, True),
        ("juan", "JUAN CARLOS PÉREZ GÓMEZ", False, False),
        ("carolina", "CAROLINA RUIZ DÍAZ", False, False),
        ("luz", "LUZ", False, True),
        ("de los", "MARÍA DE LOS ÁNGELES", False, False),
        ("maría ángeles", "MARÍA DE LOS ÁNGELES", False, True),
        ("juan pedro", "JUAN CARLOS PÉREZ GÓMEZ", False, False),  # every word still counts
        ("el rosal", "VDA/ EL ROSAL CASA 4", True, True),
        ("el", "VDA/ EL ROSAL CASA 4", True, False),
        ("casa 4", "VDA/ EL ROSAL CASA 4", True, False),
        ("4", "VDA/ EL ROSAL CASA 4", True, False),
        ("sector", "VEREDA LA PRADERA SECTOR 2", True, False),
        ("la pradera", "VEREDA LA PRADERA SECTOR 2", True, True),
        ("san", "B/ SAN JOSÉ", True, False),
        ("barrio san jose", "B/ SAN JOSÉ", True, True),
        ("calle 45", "CALLE 45 # 12-30", True, False),
        ("calle 45 # 12-30", "CALLE 45 # 12-30", True, True),
        ("centro", "B/ CENTRO", True, True),
        ("casa", "CASA", True, False),  # a record that names no place: not known by it
        ("", "B/ CENTRO", True, False),
    ],
)
def test_a_fact_is_known_when_its_words_say_who_or_where(
    given: str, record: str, address: bool, known: bool
) -> None:
    assert fact_known(given, record, address=address) is known


def verify(gw: Any, payload: dict[str, Any], user: str) -> Any:
    return gw.post(
        "/api/v1/clients/101/verify", json=payload, headers={"X-End-User-Id": user}
    ).json()


def test_strict_words_every_record_shares_verify_no_one(start_pair: StartPair) -> None:
    _, gw = start_pair(IDENTITY_POLICY="strict")
    for number, weak in enumerate(WEAK):
        out = verify(gw, weak, f"stranger-{number}")
        assert out["action"] == "client_verification_failed", (weak, out)
        assert "verification_id" not in out["data"]
        # The resolve of the same words names no one either (never the record, never an id).
        found = gw.post(
            "/api/v1/clients/resolve", json=weak, headers={"X-End-User-Id": f"r-{number}"}
        )
        assert found.status_code == 404, (weak, found.text)
        assert found.json()["action"] in ("client_verification_failed", "client_not_found")
    # What the holder knows still verifies, in their own words.
    assert verify(gw, KNOWN, "holder")["action"] == "client_verified"


def test_spec_keeps_the_specs_partial_match(start_pair: StartPair) -> None:
    """Under the default policy the spec's rule holds unchanged: every word given is a word
    of the record (why a public bot runs `strict`)."""
    _, gw = start_pair()
    out = verify(gw, WEAK[0] | {"internet_plan_name": "plan 10mb"}, "anyone")
    assert out["action"] == "client_verified", out


@pytest.mark.anyio
async def test_mcp_verify_refuses_the_shared_words(start_pair: StartPair) -> None:
    _, gw = start_pair()  # MCP is strict whatever REST runs
    async with mcp_session(gw) as session:
        weak = await call(
            session, "verify_customer", service_id=101, name="juan", address="el", plan_name="plan"
        )
        known = await call(
            session,
            "verify_customer",
            service_id=101,
            name="Juan Perez",
            address="Vereda el Rosal",
            plan_name="plan 10mb",
        )
    assert not weak.is_error and weak.data["verified"] is False, weak.data
    assert known.data["verified"] is True, known.data
