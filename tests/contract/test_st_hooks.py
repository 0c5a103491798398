"""The fuzz run's own guards (st_hooks.py, test_schemathesis.py) refuse what issue 17 refuses:
a 503 that is not the fuzzer's fair share, a fair share without Retry-After, junk written
upstream. Checked on plain values, so a guard that stopped guarding fails here first."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from tests.contract import st_hooks
from tests.contract.test_schemathesis import _junk_writes


def _response(status: int, body: dict[str, Any], headers: dict[str, list[str]]) -> Any:
    return SimpleNamespace(status_code=status, content=json.dumps(body).encode(), headers=headers)


CASE = SimpleNamespace(method="GET", path="/api/v1/clients/")


@pytest.mark.parametrize(
    "body",
    [
        {"ok": False, "action": "upstream_rate_limited"},
        {
            "ok": False,
            "action": "ticket_creation_failed",
            "meta": {"reason": "upstream_rate_limited"},
        },
    ],
)
def test_fair_share_503_with_retry_after_passes(body: dict[str, Any]) -> None:
    response = _response(503, body, {"retry-after": ["7"]})
    assert st_hooks.only_fair_share_503(None, response, CASE) is None


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        ({"ok": False, "action": "store_unavailable"}, {"retry-after": ["1"]}),
        ({"ok": False, "action": "upstream_rate_limited"}, {}),
        ({"ok": False, "action": "upstream_rate_limited"}, {"retry-after": ["0"]}),
        ({"detail": "Service Unavailable"}, {"retry-after": ["3"]}),
        ({"action": "ticket_creation_failed", "meta": {"reason": "store_unavailable"}}, {}),
        ({"action": "ticket_creation_failed", "meta": {"reason": "upstream_rate_limited"}}, {}),
    ],
)
def test_any_other_503_fails_the_run(body: dict[str, Any], headers: dict[str, list[str]]) -> None:
    with pytest.raises(AssertionError):
        st_hooks.only_fair_share_503(None, _response(503, body, headers), CASE)


def test_junk_written_upstream_is_found() -> None:
    before = {1: ("3001112233, 3114445566", "12345678"), 2: ("3001112233", "87654321")}
    clean = [
        {"id_servicio": 1, "telefono": "3209998877, 3114445566", "cedula": "12345678"},
        {"id_servicio": 2, "telefono": "+573209998877 3114445566", "cedula": "AB1234"},
    ]
    assert _junk_writes(before, clean) == []
    junk = [
        {"id_servicio": 1, "telefono": "32099x8877", "cedula": "12345678"},
        {"id_servicio": 2, "telefono": "3001112233", "cedula": "12-34"},
    ]
    assert _junk_writes(before, junk) == [(1, "telefono", "32099x8877"), (2, "cedula", "12-34")]
