"""A scripted AI-agent conversation against a running gateway's /mcp (e.g. `make demo`).

It plays both sides of a support chat: a customer who says "I have no internet" and gives
their document, name, address and plan, and an agent that follows the tools' order with the
official `mcp` SDK client: find_customer -> verify_customer -> customer_account ->
diagnose_connection, printing the Spanish sentence each tool answers.

    make demo            # prints the URL, username and password
    .venv/bin/python examples/agent_conversation.py --url http://127.0.0.1:8000 \\
        --username demo --password <the printed password>

The customer's own data (what the person at the keyboard knows) is read once through the
REST API with the same credentials; the agent itself learns only what the tools answer.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from typing import Any

import httpx
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import TextContent


def token_for(url: str, username: str, password: str) -> str:
    response = httpx.post(
        f"{url}/api/v1/auth/token", data={"username": username, "password": password}, timeout=30
    )
    if response.status_code != 200:
        raise SystemExit(f"login refused ({response.status_code}): check --username/--password")
    token: str = response.json()["access_token"]
    return token


def a_customer(url: str, token: str) -> dict[str, Any]:
    """An active customer with a document, a name, an address and a plan: the person who
    will talk to the agent (read through REST, as they know their own data)."""
    headers = {"Authorization": f"Bearer {token}"}
    rows = httpx.get(f"{url}/api/v1/clients/", headers=headers, timeout=120).json()["data"]
    for row in rows:
        if (
            row["service_state"] == "active"
            and row["document"]
            and row["name"]
            and row["address"]
            and row["internet_plan_name"]
        ):
            return dict(row)
    raise SystemExit("no active customer with a document, name, address and plan")


class ConversationFailed(Exception):
    """A tool answered an error; the conversation stops there."""


async def _tool(
    session: ClientSession, say: Callable[[str], None], tool: str, **arguments: Any
) -> dict[str, Any]:
    shown = {k: ("ver_…" if k == "verification_id" else v) for k, v in arguments.items()}
    say(f"  agent  -> {tool}({json.dumps(shown, ensure_ascii=False)})")
    result = await session.call_tool(tool, arguments)
    texts = [block.text for block in result.content if isinstance(block, TextContent)]
    sentence = texts[0] if texts else ""
    say(f"  {'error' if result.is_error else 'tool '}  <- {sentence}")
    if result.is_error:
        raise ConversationFailed(f"{tool} failed: {sentence}")
    data: dict[str, Any] = result.structured_content or {}
    return data


async def converse(
    url: str, token: str, customer: dict[str, Any], say: Callable[[str], None] = print
) -> list[str]:
    """Run the conversation; the tools in the order they were called."""
    called: list[str] = []
    headers = {"Authorization": f"Bearer {token}", "X-End-User-Id": "agent-demo-chat-1"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        say(f'customer: "No tengo internet. Mi documento es {customer["document"]}."')
        found = await _tool(session, say, "find_customer", document=customer["document"])
        called.append("find_customer")
        service_id = found["service_ids"][0]
        say(
            f'customer: "Soy {customer["name"]}, vivo en {customer["address"]}, '
            f'tengo el plan {customer["internet_plan_name"]}."'
        )
        verified = await _tool(
            session,
            say,
            "verify_customer",
            service_id=service_id,
            name=customer["name"],
            address=customer["address"],
            plan_name=customer["internet_plan_name"],
        )
        called.append("verify_customer")
        if not verified.get("verified"):
            raise ConversationFailed("the customer's identity was not verified")
        vid = verified["verification_id"]
        await _tool(session, say, "customer_account", verification_id=vid)
        called.append("customer_account")
        await _tool(session, say, "diagnose_connection", verification_id=vid, wait=20)
        called.append("diagnose_connection")
    return called


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000", help="the gateway's base URL")
    parser.add_argument("--username", default="demo")
    parser.add_argument("--password", help="as `make demo` prints it")
    parser.add_argument("--token", help="a token instead of --username/--password")
    ns = parser.parse_args(argv)
    url = ns.url.rstrip("/")
    if ns.token:
        token = ns.token
    elif ns.password:
        token = token_for(url, ns.username, ns.password)
    else:
        parser.error("give --password (as `make demo` prints it) or --token")
    customer = a_customer(url, token)
    failure: str | None = None
    try:
        asyncio.run(converse(url, token, customer))
    except* ConversationFailed as group:
        failure = str(group.exceptions[0])
    except* (httpx.HTTPError, httpx2.HTTPError, OSError) as group:
        failure = f"cannot talk to {url}/mcp ({type(group.exceptions[0]).__name__})"
    if failure is not None:
        print(failure, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
