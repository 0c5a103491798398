"""/mcp as the MCP Inspector's command line sees it (issue 28): `tools/list` with an API key
lists exactly the key's tools, each with its input schema.

The Inspector comes from the npm registry through `npx` (skipped without it). Its releases
that take `--header` need Node 22; on an older Node, npx installs the last release that runs
there (0.15), whose command line sends no header of its own: the key is then added by a
loopback forwarder in front of the gateway, so that the run is the same but for that.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from isp_gateway.auth.keys import generate_key, new_entry, write_key_entries
from isp_gateway.mcp.auth import allows
from isp_gateway.mcp.tools import TOOLS
from tests.conftest import Simulator, StartGateway
from tests.support import run_server

NPX = shutil.which("npx")
INSPECTOR = "@modelcontextprotocol/inspector"
SCOPES = ["clients:read", "clients:verify", "plans:read"]
# How an Inspector without `--header` refuses it (0.15 reads it as a server's arguments).
NO_HEADER_OPTION = ("Arguments cannot be passed", "unknown option", "--header")


def forwarder(target: str, headers: dict[str, str]) -> Starlette:
    """POST /mcp to `target` with `headers` added: what the old Inspector cannot send."""

    async def forward(request: Request) -> Response:
        sent = {k: v for k, v in request.headers.items() if k.lower() not in ("host",)}
        async with httpx.AsyncClient(timeout=30) as client:
            answer = await client.post(
                f"{target}/mcp", content=await request.body(), headers={**sent, **headers}
            )
        kept = {k: v for k, v in answer.headers.items() if k.lower() in ("content-type",)}
        return Response(answer.content, answer.status_code, headers=kept)

    return Starlette(routes=[Route("/mcp", forward, methods=["POST"])])


def inspector(url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    assert NPX is not None
    command = [NPX, "-y", INSPECTOR, "--cli", f"{url}/mcp", "--transport", "http"]
    return subprocess.run(
        [*command, "--method", "tools/list", *extra],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.skipif(NPX is None, reason="npx is not installed (the MCP Inspector runs with it)")
def test_the_inspector_lists_the_keys_tools(
    tmp_path: Path, simulator: Simulator, start_gateway: StartGateway
) -> None:
    key = generate_key()
    path = tmp_path / "keys.json"
    write_key_entries(path, [new_entry(key, "inspector", SCOPES, None)])
    gw = start_gateway(simulator.url, API_KEYS_FILE=str(path))
    done = inspector(gw.url, "--header", f"X-API-Key: {key}")
    said = done.stderr + done.stdout
    if done.returncode != 0 and any(sign in said for sign in NO_HEADER_OPTION):
        # An Inspector without `--header` (Node < 22): the same run through the forwarder.
        with run_server(forwarder(gw.url, {"X-API-Key": key})) as url:
            done = inspector(url)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    listed = {tool["name"]: tool for tool in json.loads(done.stdout)["tools"]}
    assert set(listed) == {t.name for t in TOOLS if allows(frozenset(SCOPES), t.scope)}
    verify = listed["verify_customer"]["inputSchema"]
    assert verify["properties"]["service_id"]["type"] == "integer"
    assert "65.000" in verify["properties"]["plan_price"]["description"]
