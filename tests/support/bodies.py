"""What the service answers and takes, as the tests write it: a refusal, an error
envelope, an MCP tool call."""

from __future__ import annotations

from typing import Any

import httpx


def assert_refused(response: httpx.Response, status: int, action: str, retry_after: str) -> None:
    """`response` is a `status` refusal with this `action`, to be asked again in
    `retry_after` seconds."""
    assert response.status_code == status, response.text
    assert response.json()["action"] == action
    assert response.headers["Retry-After"] == retry_after


def error_body(action: str, message: str, **extra: Any) -> dict[str, Any]:
    """The whole error envelope a refusal answers: `action`, `message`, and `extra` fields
    (e.g. `data`) in place of the defaults."""
    return {
        "ok": False,
        "type": "error",
        "action": action,
        "data": None,
        "message": message,
        "meta": None,
        **extra,
    }


def tool_call(tool: str, /, **arguments: Any) -> dict[str, Any]:
    """The JSON-RPC body of one MCP `tools/call` of `tool`, as POST /mcp takes it."""
    params = {"name": tool, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
