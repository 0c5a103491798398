"""Fixtures for /mcp: the SDK's own client over HTTP against the real app and simulator."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import Gateway


@asynccontextmanager
async def mcp_session_at(
    url: str, token: str, *, end_user: str | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized MCP client session on `url`/mcp with a Bearer token and, when given,
    an X-End-User-Id."""
    headers = {"Authorization": f"Bearer {token}"}
    if end_user is not None:
        headers["X-End-User-Id"] = end_user
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def mcp_session(
    gw: Gateway, *, end_user: str | None = None
) -> AbstractAsyncContextManager[ClientSession]:
    """mcp_session_at on a gateway of the fixtures, with its token."""
    return mcp_session_at(gw.url, gw.token, end_user=end_user)


class Result:
    """One tool result: its error flag, structured data (without the agent's hint), the
    hint (`agent_hint`, for the model) and every text it carries."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.is_error = bool(raw.is_error)
        structured: dict[str, Any] = raw.structured_content or {}
        self.hint: str | None = structured.get("agent_hint")
        self.data = {k: v for k, v in structured.items() if k != "agent_hint"}
        self.texts = [block.text for block in raw.content if getattr(block, "text", None)]

    @property
    def sentence(self) -> str:
        return self.texts[0]

    def everything(self) -> str:
        """All the agent could read: texts and structured content, the hint included."""
        structured = {**self.data, "agent_hint": self.hint}
        return "\n".join([*self.texts, json.dumps(structured, ensure_ascii=False)])


async def call(session: ClientSession, tool: str, **arguments: Any) -> Result:
    return Result(await session.call_tool(tool, arguments))


async def open_ticket(
    session: ClientSession, vid: str, subject: str, description: str, **more: Any
) -> Result:
    """open_ticket for the customer verification `vid` names."""
    arguments = {"subject": subject, "description": description, **more}
    return await call(session, "open_ticket", verification_id=vid, **arguments)


def customer(gw: Gateway, service_id: int) -> dict[str, Any]:
    """The customer's own data as REST shows it (what the person at the keyboard knows)."""
    response = gw.get(f"/api/v1/clients/by-service-id/{service_id}")
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


def pick_customer(gw: Gateway, **want: Any) -> dict[str, Any]:
    """An active customer with a phone, a document, a zone and a technician (and `want`)."""
    rows = gw.get("/api/v1/clients/").json()["data"]
    for row in rows:
        if (
            row["phone"]
            and row["document"]
            and row["zone_id"] is not None
            and row["technician_id"] is not None
            and row["name"]
            and row["address"]
            and row["internet_plan_name"]
            and all(row.get(k) == v for k, v in want.items())
        ):
            return customer(gw, row["service_id"])
    pytest.fail(f"no simulator customer fits {want}")


def statement(client: dict[str, Any]) -> dict[str, Any]:
    """verify_customer's arguments as the customer states them."""
    return {
        "name": client["name"],
        "address": client["address"],
        "plan_name": client["internet_plan_name"],
    }
