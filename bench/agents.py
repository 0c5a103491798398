"""(h) AI agents: an MCP tool call's server time beside the same REST call, and what the
audit costs a ticket creation.

The simulator and two gateways run as real processes on loopback, with the shipped defaults
except: JSON logs (the access log's `duration_ms` is the server time read here), a zone cap
high enough for the tickets below, and on the second gateway `AUDIT_ENABLED=false`.

On warm caches, in one loop, alternating: `find_customer` by document beside
`GET /clients/by-document/{document}`, and `customer_account` beside
`GET /clients/{id}/account` (the MCP calls through the official SDK client, one session,
stateless JSON answers). Then ticket creations, alternating between the gateway with the
audit on and the one with it off, each on its own customer. Every request carries its own
`X-Request-ID`, so each server time is read back from the access log by that id.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from bench import lookups, procs
from bench.indexing import _percentile

# Request ids: a label and a counter, set just before each request goes out.
_next_id: list[str] = ["warm-0"]


def _tag(label: str, number: int) -> str:
    _next_id[0] = f"{label}-{number}"
    return _next_id[0]


async def _stamp(request: Any) -> None:
    request.headers["X-Request-ID"] = _next_id[0]


def _token(url: str) -> str:
    response = httpx.post(
        f"{url}/api/v1/auth/token", data={"username": procs.USERNAME, "password": procs.PASSWORD}
    )
    response.raise_for_status()
    token: str = response.json()["access_token"]
    return token


@asynccontextmanager
async def _mcp(url: str, token: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60, event_hooks={"request": [_stamp]}) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def _customers(rest: httpx.Client) -> list[dict[str, Any]]:
    """Active customers with a document, a zone and a technician, and no open ticket."""
    rows = rest.get("/api/v1/clients/").json()["data"]
    fit = [
        r
        for r in rows
        if r["document"]
        and r["zone_id"] is not None
        and r["technician_id"] is not None
        and r["service_state"] == "active"
        and r["name"]
        and r["address"]
        and r["internet_plan_name"]
    ]
    if len(fit) < 2:
        raise RuntimeError("too few suitable customers in the simulated data")
    return fit


async def _agent_rounds(url: str, token: str, customer: dict[str, Any], rounds: int) -> None:
    service_id = customer["service_id"]
    auth = {"Authorization": f"Bearer {token}"}
    async with (
        httpx.AsyncClient(
            base_url=url, headers=auth, timeout=60, event_hooks={"request": [_stamp]}
        ) as rest,
        _mcp(url, token) as session,
    ):
        verified = await session.call_tool(
            "verify_customer",
            {
                "service_id": service_id,
                "name": customer["name"],
                "address": customer["address"],
                "plan_name": customer["internet_plan_name"],
            },
        )
        data = verified.structured_content or {}
        if not data.get("verified"):
            raise RuntimeError(f"verify_customer failed: {data}")
        vid = data["verification_id"]
        document = customer["document"]
        calls: list[tuple[str, Callable[[], Any]]] = [
            ("rest-find", lambda: rest.get(f"/api/v1/clients/by-document/{document}")),
            ("mcp-find", lambda: session.call_tool("find_customer", {"document": document})),
            ("rest-account", lambda: rest.get(f"/api/v1/clients/{service_id}/account")),
            (
                "mcp-account",
                lambda: session.call_tool("customer_account", {"verification_id": vid}),
            ),
        ]
        for number in range(-20, rounds):  # 20 warm-up rounds, not counted
            for label, make in calls:
                request_id = _tag(label if number >= 0 else "warm", number)
                result = await make()
                failed = (
                    result.is_error if hasattr(result, "is_error") else result.status_code != 200
                )
                if failed:
                    raise RuntimeError(f"{label} failed ({request_id})")


def _tickets(on: str, off: str, token: str, customers: list[dict[str, Any]], count: int) -> int:
    """Alternating ticket creations on the audit-on and audit-off gateways; how many were
    created (each customer once, so the duplicate guard never answers instead)."""
    created = 0
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(timeout=60) as http:
        for number, customer in enumerate(customers[: 2 * count]):
            url, label = (on, "ticket-on") if number % 2 == 0 else (off, "ticket-off")
            body = {
                "service_id": customer["service_id"],
                "subject": "No Tiene Internet",
                "description": "Sin servicio (bench)",
                "technician_id": customer["technician_id"],
                "zone_id": customer["zone_id"],
            }
            headers = {**auth, "X-Request-ID": _tag(label, number)}
            response = http.post(f"{url}/api/v1/tickets", json=body, headers=headers)
            created += response.status_code == 201
    return created


def _cell(samples: list[float]) -> str:
    if not samples:
        return f"{'-':>8}{'-':>9}{0:>6}"
    return f"{statistics.median(samples):>8.2f}{_percentile(samples, 0.99):>9.2f}{len(samples):>6}"


def run(*, clients: int = 2_000, rounds: int = 200, tickets: int = 40) -> None:
    print(
        f"(h) agents: MCP tool call beside the same REST call, warm, {rounds} rounds; "
        f"ticket creation with the audit on and off, {tickets} each ({clients:,} clients)"
    )
    env = {"LOG_FORMAT": "json", "MAX_ACTIVE_TICKETS_PER_ZONE": "100000"}
    with (
        procs.simulator(clients) as upstream,
        lookups._log_file() as (on_path, on_log),
        lookups._log_file() as (off_path, off_log),
    ):
        with (
            procs.gateway(upstream, log=on_log, **env) as on,
            procs.gateway(upstream, log=off_log, AUDIT_ENABLED="false", **env) as off,
        ):
            token = _token(on.url)
            with httpx.Client(
                base_url=on.url, headers={"Authorization": f"Bearer {token}"}, timeout=120
            ) as rest:
                customers = _customers(rest)
                # Warm: the pending invoices and the active tickets load on first use.
                rest.get(f"/api/v1/clients/{customers[0]['service_id']}/account")
                httpx.get(
                    f"{off.url}/api/v1/clients/",
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=120,
                )
            asyncio.run(_agent_rounds(on.url, token, customers[0], rounds))
            made = _tickets(on.url, off.url, token, customers[1:], tickets)
        # The gateways have stopped: their access logs are complete.
        times = procs.server_times(on_path, off_path, ok=(200, 201))
    print(f"    server time (access log), ms      {'p50':>8}{'p99':>9}{'n':>6}")
    rows = [
        ("find by document    REST", "rest-find"),
        ("find_customer       MCP", "mcp-find"),
        ("account             REST", "rest-account"),
        ("customer_account    MCP", "mcp-account"),
        ("ticket, audit on    REST", "ticket-on"),
        ("ticket, audit off   REST", "ticket-off"),
    ]
    for name, label in rows:
        print(f"    {name:34}{_cell(times.get(label, []))}")
    print(f"    tickets created: {made} of {2 * tickets} (409/422 answers are not counted)")
