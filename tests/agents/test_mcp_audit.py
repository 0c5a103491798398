"""MCP tool calls in the audit (CALLERS.md 4 and 6): an `mcp_tool` event per call (the
tool's name, `ok` or `error`, the service its verification names), kept one by one when it
served a customer and counted per caller, tool and minute otherwise; a refusal of a missing,
forged or foreign verification id counted as `verification_required`; never the customer's
data in clear."""

from __future__ import annotations

import json
import secrets
from typing import Any

import pytest

from tests.agents.conftest import call, mcp_session, pick_customer, statement
from tests.conftest import Gateway


async def audit(gw: Gateway, event: str) -> list[tuple[str, Any]]:
    """(outcome, details) of the gateway's events of one kind, oldest first."""
    found = await gw.runtime.audit.query(event=event, limit=500)
    return [(e["outcome"], e["details"]) for e in reversed(found)]


async def audit_services(gw: Gateway, event: str) -> list[tuple[str, Any, Any]]:
    """(outcome, service_id, details) of the gateway's events of one kind, oldest first."""
    found = await gw.runtime.audit.query(event=event, limit=500)
    return [(e["outcome"], e["service_id"], e["details"]) for e in reversed(found)]


@pytest.mark.anyio
async def test_every_tool_call_is_audited_without_customer_data(gateway: Gateway) -> None:
    client = pick_customer(gateway)
    async with mcp_session(gateway, end_user="wa-5511") as session:
        found = await call(session, "find_customer", document=client["document"])
        assert not found.is_error, found.texts
        verified = await call(
            session, "verify_customer", service_id=client["service_id"], **statement(client)
        )
        vid = verified.data["verification_id"]
        assert not (await call(session, "customer_account", verification_id=vid)).is_error
        # Refused: no id, a forged one; an unknown tool, named like a key; bad arguments.
        assert (await call(session, "customer_account")).is_error
        forged = "ver_" + secrets.token_urlsafe(32)
        assert (await call(session, "customer_summary", verification_id=forged)).is_error
        assert (await call(session, "igw_" + "x" * 43)).is_error
        assert (await call(session, "find_customer", phone="1", document="2")).is_error
    sid = client["service_id"]
    # Calls that served the customer name it and are kept one by one; the others are
    # counted (one each here: every one is another tool or error).
    refused = {"error": "verification_required", "count": 1}
    assert await audit_services(gateway, "mcp_tool") == [
        ("ok", None, {"tool": "find_customer", "count": 1}),
        ("ok", sid, {"tool": "verify_customer"}),
        ("ok", sid, {"tool": "customer_account"}),
        ("error", None, {"tool": "customer_account", **refused}),
        ("error", None, {"tool": "customer_summary", **refused}),
        ("error", None, {"tool": "unknown", "error": "unknown_tool", "count": 1}),
        ("error", None, {"tool": "find_customer", "error": "invalid_arguments", "count": 1}),
    ]
    assert await audit(gateway, "verification_required") == [
        ("refused", {"tool": "customer_account", "count": 1}),
        ("refused", {"tool": "customer_summary", "count": 1}),
    ]
    everything = await gateway.runtime.audit.query(limit=500)
    assert {(e["caller"], e["end_user"]) for e in everything} == {("jwt:bot", "wa-5511")}
    text = json.dumps(everything, ensure_ascii=False)
    for value in (client["document"], client["phone"], client["name"], client["address"], vid):
        assert value and value not in text, value


@pytest.mark.anyio
async def test_another_end_users_id_is_refused_and_audited(gateway: Gateway) -> None:
    client = pick_customer(gateway)
    async with mcp_session(gateway, end_user="alice") as session:
        verified = await call(
            session, "verify_customer", service_id=client["service_id"], **statement(client)
        )
        vid = verified.data["verification_id"]
    async with mcp_session(gateway, end_user="mallory") as session:
        for _ in range(3):  # a loop of the same refused call: counted (CALLERS.md 6)
            result = await call(session, "diagnose_connection", verification_id=vid, wait=0)
            assert result.data.get("error") == "verification_required"
    refused = await gateway.runtime.audit.query(event="verification_required", limit=500)
    # One event a minute (a minute may turn in between), the refusals in its count.
    assert {(e["end_user"], e["outcome"]) for e in refused} == {("mallory", "refused")}
    assert sum(e["details"]["count"] for e in refused) == 3
    # Nothing was pinged or diagnosed for mallory.
    assert await audit(gateway, "diagnose") == [] and await audit(gateway, "ping") == []
