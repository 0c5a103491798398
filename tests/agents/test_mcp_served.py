"""/mcp under both servers `serve` can run (granian, the default, and uvicorn), in their own
process: the SDK session manager's lifespan starts and stops with the app's."""

from __future__ import annotations

import pytest

from isp_gateway.mcp.tools import TOOLS
from tests.agents.conftest import call, mcp_session_at
from tests.cli.test_servers import SERVERS, start_served


@pytest.mark.anyio
@pytest.mark.parametrize("server", SERVERS)
async def test_mcp_served_by_each_server(password_hash: str, server: str) -> None:
    served = start_served(password_hash, server)
    try:
        token = served.auth["Authorization"].removeprefix("Bearer ")
        async with mcp_session_at(served.url, token) as session:
            assert len((await session.list_tools()).tools) == len(TOOLS) == 14
            subjects = await call(session, "list_ticket_subjects")
            assert not subjects.is_error
            assert "No Tiene Internet" in subjects.data["all"]
            refused = await call(session, "customer_summary", verification_id="ver_x")
            assert refused.data["error"] == "verification_required"
    finally:
        log = served.stop()
    assert served.proc.returncode == 0, log
    assert "Traceback" not in log, log
