"""The one price reader (kit/prices.py): how people and backends write a price."""

from __future__ import annotations

import re
from typing import Any

import pytest

from isp_gateway.kit.prices import PRICE_PATTERN, read_price


@pytest.mark.parametrize(
    ("text", "price"),
    [
        # Issue 28.5: the way Colombians write 65,000 pesos.
        ("65.000", 65000.0),
        ("65,000", 65000.0),
        ("$65.000", 65000.0),
        ("$ 65.000", 65000.0),
        ("65000.00", 65000.0),
        ("65000", 65000.0),
        ("65 000", 65000.0),
        ("1.234.567", 1234567.0),
        # One or two digits after the last separator: decimals.
        ("65.50", 65.5),
        ("40000,5", 40000.5),
        ("65.000,50", 65000.5),
        ("65,000.50", 65000.5),
        (65000, 65000.0),
        (65.5, 65.5),
    ],
)
def test_prices_as_written(text: Any, price: float) -> None:
    assert read_price(text) == price
    if isinstance(text, str):
        # The document's pattern accepts exactly what the reader reads.
        assert re.fullmatch(PRICE_PATTERN, text)


@pytest.mark.parametrize(
    "text",
    ["", "  ", "gratis", "65.0000", "65.00.0", "1.23.456", "12,34.567", "-5", "1e5", "9" * 400,
     "65.000.50", True, None, float("nan"), float("inf")],
)  # fmt: skip
def test_what_is_no_price(text: Any) -> None:
    assert read_price(text) is None
    if isinstance(text, str) and text != "9" * 400:
        assert not re.fullmatch(PRICE_PATTERN, text)
