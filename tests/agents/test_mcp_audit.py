"""MCP tool calls in the audit (CALLERS.md 4): one `mcp_tool` event per call (the tool's
name, `ok` or `error`), a `verification_required` event per refusal of a missing, forged or
foreign verification id, and never the customer's data in clear."""

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
    assert await audit(gateway, "mcp_tool") == [
        ("ok", {"tool": "find_customer"}),
        ("ok", {"tool": "verify_customer"}),
        ("ok", {"tool": "customer_account"}),
        ("error", {"tool": "customer_account", "error": "verification_required"}),
        ("error", {"tool": "customer_summary", "error": "verification_required"}),
        ("error", {"tool": "unknown", "error": "unknown_tool"}),
        ("error", {"tool": "find_customer", "error": "invalid_arguments"}),
    ]
    assert await audit(gateway, "verification_required") == [
        ("refused", {"tool": "customer_account"}),
        ("refused", {"tool": "customer_summary"}),
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
        for _ in range(3):  # a loop of the same refused call: one event each
            result = await call(session, "diagnose_connection", verification_id=vid, wait=0)
            assert result.data.get("error") == "verification_required"
    refused = await gateway.runtime.audit.query(event="verification_required", limit=500)
    assert [(e["end_user"], e["outcome"]) for e in refused] == [("mallory", "refused")] * 3
    # Nothing was pinged or diagnosed for mallory.
    assert await audit(gateway, "diagnose") == [] and await audit(gateway, "ping") == []
