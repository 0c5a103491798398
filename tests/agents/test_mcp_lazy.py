"""The MCP SDK is loaded by the first /mcp request, not by every worker (issue 25: a worker
that never serves an agent does not carry the SDK's memory)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import httpx

from tests.conftest import API_KEY, JWT_SECRET, USERNAME, Gateway


def test_a_worker_that_serves_no_agent_never_imports_the_sdk(password_hash: str) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        from fastapi.testclient import TestClient
        from isp_gateway.app import create_app
        from isp_gateway.settings import load_settings
        settings = load_settings(
            UPSTREAM_NET_KEY={API_KEY!r}, UPSTREAM_NET_HOST="http://127.0.0.1:9",
            JWT_SECRET_KEY={JWT_SECRET!r}, API_USERNAME={USERNAME!r},
            API_PASSWORD_HASH={password_hash!r}, MCP_ENABLED=True,
        )
        with TestClient(create_app(settings)) as client:
            assert client.get("/health").status_code == 200
            print(sorted(m for m in sys.modules if m == "mcp" or m.startswith("mcp.")))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_first_agent_request_starts_the_sessions(gateway: Gateway) -> None:
    sessions = gateway.app.state.mcp_sessions
    assert sessions._manager is None
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {**gateway.auth, "Accept": "application/json, text/event-stream"}
    for _ in range(2):  # the second reuses the running sessions
        answer = httpx.post(f"{gateway.url}/mcp", json=body, headers=headers, timeout=10)
        assert answer.status_code == 200, answer.text
        assert answer.json()["result"]["tools"]
    assert sessions._manager is not None
