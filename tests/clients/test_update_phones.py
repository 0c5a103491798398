"""Issue 17, client update (CALLERS.md 2): a phone is 7 to 15 digits once spaces, dashes,
dots, parentheses and one leading + are removed, else 400 `invalid_phone` with nothing sent;
the new number replaces the record's first, the others stay. Checked in what the simulator
stored."""

from __future__ import annotations

import re

import pytest

from isp_gateway.clients.phones import replace_first_phone
from isp_gateway.simulator.dataset import two_number_service
from tests.clients.conftest import calls, quiet, warm
from tests.conftest import Pair, Simulator, StartGateway, StartSimulator

PATCH = "PATCH /api/clientes/{id}/perfil/"


def stored(sim: Simulator, service_id: int) -> str:
    row = next(c for c in sim.state.dataset.clients if c["id_servicio"] == service_id)
    return str(row["telefono"])


@pytest.mark.parametrize(
    "phone",
    [
        "abc 300-123-45(67) xyz",
        "300123456x",
        "300 123 4567 ext 2",
        "300#1234567",
        "300+1234567",
        "++57 300 123 4567",
        "300_123_4567",
        "123456",  # 6 digits
        "1234567890123456",  # 16 digits
        "３００１２３４５６７",  # fullwidth digits
        "300/123 4567",
    ],
)
def test_a_phone_with_anything_else_is_refused_and_nothing_sent(pair: Pair, phone: str) -> None:
    sim, gw = pair
    quiet(gw, sim)
    before = stored(sim, 101)
    response = gw.put("/api/v1/clients/101", json={"phone": phone, "document": "A1234567"})
    assert response.status_code == 400, response.text
    assert response.json()["action"] == "invalid_phone"
    assert sim.state.calls.total() == 0
    assert stored(sim, 101) == before


@pytest.mark.parametrize(
    ("service_id", "phone", "expected"),
    [
        (101, "320-999 88.77", "3209998877,3109876543"),
        (101, "(320) 999-8877", "3209998877,3109876543"),
        (101, "+57 320 999 8877", "3209998877,3109876543"),
        (101, "3109876543", "3109876543"),  # the second becomes the first, once
        (104, "3209998877", "3209998877 3502223344"),  # the record's own separator
        (107, "3209998877", "3209998877; 3004445567"),
        (103, "3209998877", "3209998877"),  # an empty field
        (102, "3209998877", "3209998877"),  # one number ("+57 3157654321")
    ],
)
def test_the_new_number_replaces_only_the_first(
    pair: Pair, service_id: int, phone: str, expected: str
) -> None:
    sim, gw = pair
    response = gw.put(f"/api/v1/clients/{service_id}", json={"phone": phone})
    assert response.status_code == 200, response.text
    assert stored(sim, service_id) == expected
    assert calls(sim, PATCH) == 1
    # The gateway's answers follow at once: both numbers still find the customer.
    for number in expected.replace(";", " ").split(","):
        for part in number.split():
            found = gw.get(f"/api/v1/clients/by-phone/{part}")
            assert found.json()["data"]["service_id"] == service_id


def test_a_loop_of_updates_never_wipes_the_second_line(pair: Pair) -> None:
    sim, gw = pair
    for number in ("3201111111", "3202222222", "3201111111", "3109876543", "3203333333"):
        assert gw.put("/api/v1/clients/101", json={"phone": number}).status_code == 200
    assert stored(sim, 101) == "3203333333"  # 3109876543 was made first, then replaced
    assert sim.state.update_profile(101, {"telefono": "3001234567,3109876543"}) is None
    for number in ("3201111111", "3202222222"):
        assert gw.put("/api/v1/clients/101", json={"phone": number}).status_code == 200
    assert stored(sim, 101) == "3202222222,3109876543"


def test_the_field_is_read_fresh_not_from_the_cache(pair: Pair) -> None:
    """A number added upstream after the cache loaded is kept too."""
    sim, gw = pair
    # Changed upstream (as the simulator applies a write) after the cache loaded.
    assert sim.state.update_profile(105, {"telefono": "3000000105,3117778899"}) is None
    assert gw.put("/api/v1/clients/105", json={"phone": "3205550000"}).status_code == 200
    assert stored(sim, 105) == "3205550000,3117778899"


def test_an_unknown_service_sends_no_write(pair: Pair) -> None:
    sim, gw = pair
    response = gw.put("/api/v1/clients/4040", json={"phone": "3209998877"})
    assert response.status_code == 404
    assert response.json()["action"] == "client_not_found"
    assert calls(sim, PATCH) == 0


def test_the_built_in_dataset_s_two_number_service(
    start_simulator: StartSimulator, start_gateway: StartGateway
) -> None:
    sim = start_simulator()
    row = two_number_service(sim.state.dataset)
    assert row is not None  # the built-in dataset always has one
    first, second = (part.strip() for part in str(row["telefono"]).split(","))
    gw = start_gateway(sim.url)
    warm(gw)
    response = gw.put(f"/api/v1/clients/{row['id_servicio']}", json={"phone": "3209998877"})
    assert response.status_code == 200, response.text
    assert str(row["telefono"]).startswith("3209998877,")
    assert str(row["telefono"]).endswith(second)
    assert first not in str(row["telefono"])


def test_replace_first_phone_rules() -> None:
    def r(field: str) -> str:
        return replace_first_phone(field, "3209998877", "57", 10)

    assert r("3001112233,3114445566") == "3209998877,3114445566"
    assert r("3001112233, 3114445566, 3114445566") == "3209998877, 3114445566"
    assert r("+57 3001112233 / 573114445566") == "3209998877 / 573114445566"
    assert r("3001112233,3209998877,3114445566") == "3209998877,3114445566"
    assert r("") == "3209998877"


@pytest.mark.parametrize(
    ("phone", "accepted"),
    [
        ("0012345", False),  # 7 digits, 5 once the international 00 is dropped
        ("00 (12) 3-456", False),  # 8 digits, 6 after the 00
        ("+00 123 45", False),
        ("001234567", True),  # 7 digits after the 00
        ("0123456", True),  # one 0 is no prefix
    ],
)
def test_the_schema_s_phone_pattern_refuses_what_the_update_refuses(
    pair: Pair, phone: str, accepted: bool
) -> None:
    """The fuzzer's find (issue 17): a phone the schema allowed (7 digits, `00` first) was
    answered 400 invalid_phone, as storing it drops the 00. The document's pattern and the
    service now agree on each side of that edge."""
    sim, gw = pair
    schema = gw.client.get("/openapi.json").json()["components"]["schemas"]
    pattern = schema["UpdateClientRequest"]["properties"]["phone"]["anyOf"][0]["pattern"]
    assert (re.search(pattern, phone) is not None) is accepted
    response = gw.put("/api/v1/clients/101", json={"phone": phone})
    assert (response.status_code == 200) is accepted, response.text
    if not accepted:
        assert response.json()["action"] == "invalid_phone"
        assert calls(sim, PATCH) == 0


def test_the_update_patterns_sit_on_the_string_branch(pair: Pair) -> None:
    """The fuzzer's find (issue 17, seed 1): a pattern beside `anyOf` made the generator draw
    values of any type for PUT and throw nearly all away (a failed health check, no PUT
    fuzzed). Each optional field's pattern is on its string branch, none beside it."""
    _, gw = pair
    schema = gw.client.get("/openapi.json").json()["components"]["schemas"]
    for name in ("document", "phone"):
        field = schema["UpdateClientRequest"]["properties"][name]
        assert "pattern" not in field
        strings = [b for b in field["anyOf"] if b.get("type") == "string"]
        assert len(strings) == 1 and strings[0]["pattern"].startswith("^")
