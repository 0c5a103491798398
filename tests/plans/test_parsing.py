"""Plan fields from the upstream's text: prices and speeds (pure functions)."""

from __future__ import annotations

from typing import Any

import pytest

from isp_gateway.upstream.plans import normalise_name, parse_price, parse_speed, to_plan


@pytest.mark.parametrize(
    ("text", "mbps"),
    [
        ("20", 20.0),
        ("10M", 10.0),
        ("10m", 10.0),
        ("512k", 0.5),
        ("1.5M", 1.5),
        (" 30 Mbps ", 30.0),
        ("100MB", 100.0),
        ("1G", 1000.0),
        (15, 15.0),
        ("", None),
        ("rapido", None),
        ("10M/2M", None),
        (None, None),
        (True, None),
    ],
)
def test_speed(text: Any, mbps: float | None) -> None:
    assert parse_speed(text) == mbps


@pytest.mark.parametrize(
    ("text", "price"),
    [
        ("40000.00", 40000.0),
        ("40,000.00", 40000.0),
        ("40000,50", 40000.5),
        ("$ 35000", 35000.0),
        (38000, 38000.0),
        ("", None),
        ("gratis", None),
        (None, None),
    ],
)
def test_price(text: Any, price: float | None) -> None:
    assert parse_price(text) == price


def test_plan_rows() -> None:
    assert to_plan({"id": "3", "nombre": " PLAN 20MB ", "tipo": "pppoe"}) is not None
    plan = to_plan({"id": 6, "nombre": "Q", "tipo": "simple_queue"})
    assert plan is not None and plan.type == "SIMPLE QUEUE"
    assert to_plan({"id": None, "nombre": "X", "tipo": "PCQ"}) is None


def test_names_compare_without_case_accents_or_punctuation() -> None:
    assert normalise_name("Plan Básico  8M!") == normalise_name("plan basico 8m")
