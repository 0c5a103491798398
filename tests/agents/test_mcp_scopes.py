"""Scopes on /mcp (CALLERS.md 3 and 5): a tool whose scope the credential lacks is neither
listed nor callable. Until API keys (the only credentials with fewer scopes than `*`) are
wired, the handlers are driven with a request context holding a narrower scope set, exactly
what McpEndpoint puts in the ASGI scope after `scopes_of`."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import mcp_types as types
import pytest
from mcp.server import ServerRequestContext
from starlette.requests import Request

from isp_gateway.audit.service import AuditLog
from isp_gateway.auth.keys import JWT_SCOPES
from isp_gateway.kit.callers import Caller
from isp_gateway.mcp.auth import allows, scopes_of
from isp_gateway.mcp.server import SCOPE_KEY, McpRequest, call_tool, list_tools
from isp_gateway.mcp.tools import BY_NAME, TOOLS
from isp_gateway.store import MemoryStore

pytestmark = pytest.mark.anyio


def context(scopes: set[str]) -> ServerRequestContext[Any, Any]:
    caller = Caller("reader-key", "reader-key", "127.0.0.1")
    # The handlers refuse before they touch the runtime's services; only the audit, which
    # records every tool call, is needed here.
    runtime = SimpleNamespace(audit=AuditLog(MemoryStore(), 100))
    mcp_request = McpRequest(caller, frozenset(scopes), runtime=runtime)  # type: ignore[arg-type]
    scope = {"type": "http", "headers": [], SCOPE_KEY: mcp_request}
    return ServerRequestContext(
        session=None,  # type: ignore[arg-type]
        lifespan_context={},
        protocol_version="2025-11-25",
        method="tools/call",
        request=Request(scope),
    )


def test_a_tool_sees_the_scopes_of_the_credential() -> None:
    # The credential decides the scopes (auth/credentials.py): the JWT user's "*" allows
    # every tool; a key's own list allows only its tools; a caller with none allows none.
    jwt = scopes_of(Caller("jwt:bot", "jwt:bot", "127.0.0.1", JWT_SCOPES))
    assert all(allows(jwt, s) for s in ("clients:read", "tickets:write", "audit:read"))
    key = scopes_of(Caller("portal", "portal", "127.0.0.1", frozenset({"clients:read"})))
    assert allows(key, "clients:read") and not allows(key, "clients:write")
    assert not allows(scopes_of(Caller("x", "x", "127.0.0.1")), "plans:read")


async def test_tools_without_the_scope_are_not_listed() -> None:
    listed = await list_tools(context({"clients:read", "clients:verify"}), None)
    assert [tool.name for tool in listed.tools] == [
        "find_customer",
        "verify_customer",
        "customer_summary",
    ]
    everything = await list_tools(context({"*"}), None)
    # The eleven of CALLERS.md 5, internet_plan (issue 28), the money tool (MONEY.md 3) and
    # current_outages (OUTAGES.md 4).
    assert len(everything.tools) == len(TOOLS) == 14


async def test_tools_without_the_scope_cannot_be_called() -> None:
    """Issue 28.1: refused, and the refusal names the scope the key lacks (the agent's hint
    says so too); a name no tool has is `unknown_tool`."""
    ctx = context({"clients:read", "clients:verify"})
    for name in ("open_ticket", "update_contact", "customer_account", "list_internet_plans"):
        params = types.CallToolRequestParams(
            name=name, arguments={"verification_id": "ver_x", "subject": "s", "description": "d"}
        )
        result = await call_tool(ctx, params)
        assert result.is_error
        structured = result.structured_content
        scope = BY_NAME[name].scope
        assert structured["error"] == "insufficient_scope"
        assert structured["required"] == scope and structured["tool"] == name
        assert scope in structured["message"] and scope in structured["agent_hint"]
    unknown = await call_tool(ctx, types.CallToolRequestParams(name="drop_tables", arguments={}))
    assert unknown.is_error and unknown.structured_content["error"] == "unknown_tool"
