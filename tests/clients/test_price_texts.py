"""REST verify reads `internet_plan_price` with the one price reader (kit/prices.py): a
bot that passes on what the customer typed, `"40.000"`, verifies, as an agent's would."""

from __future__ import annotations

from typing import Any

import pytest

from tests.clients.conftest import body, envelope
from tests.conftest import Gateway, Pair

# Service 101 of the crafted data: JUAN CARLOS PEREZ, plan 10MB at 40000.
FACTS = {"name": "Juan Perez", "address": "Vereda el Rosal", "internet_plan_name": "plan 10mb"}


def verify(gw: Gateway, price: Any) -> Any:
    return gw.post("/api/v1/clients/101/verify", json={**FACTS, "internet_plan_price": price})


@pytest.mark.parametrize("price", ["40.000", "40,000", "$40.000", "$ 40.000", "40000.00", "40000"])
def test_a_price_as_people_write_it_verifies(pair: Pair, price: str) -> None:
    out = envelope(verify(pair[1], price), 200)
    assert out["action"] == "client_verified", out
    assert "internet_plan_price" in out["data"]["matched_fields"]


def test_decimals_are_not_thousands(pair: Pair) -> None:
    """`40.50` is forty and a half, not 40,500: the price does not match."""
    out = envelope(verify(pair[1], "40.50"), 200)
    assert out["action"] == "client_verification_failed"
    assert "internet_plan_price" not in out["data"]["matched_fields"]


def test_a_text_that_is_no_price_is_a_clear_422(pair: Pair) -> None:
    response = verify(pair[1], "cuarenta mil")
    out = body(response)
    assert response.status_code == 422
    assert out["action"] == "validation_error"
    assert out["meta"]["errors"][0]["field"] == "body.internet_plan_price"
    assert "65.000" in out["meta"]["errors"][0]["message"]
