"""/mcp driven by the SDK's own client over HTTP: the two conversations an agent has most,
and what the tools take from the client record (zone, technician)."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from isp_gateway.mcp.tools import TOOLS as TOOL_SPECS
from tests.agents.conftest import (
    Result,
    call,
    customer,
    mcp_session,
    open_ticket,
    pick_customer,
    statement,
)
from tests.conftest import USERNAME, Gateway, Simulator, StartGateway
from tests.support import tool_call

pytestmark = pytest.mark.anyio

TOOLS = {
    "find_customer",
    "verify_customer",
    "customer_summary",
    "customer_account",
    "promise_payment",
    "diagnose_connection",
    "customer_tickets",
    "open_ticket",
    "update_contact",
    "list_internet_plans",
    "internet_plan",
    "list_payment_methods",
    "list_ticket_subjects",
    "current_outages",
}


# A cap no zone of the simulator's dataset reaches: the conversations open tickets freely.
ROOMY = 1000


def has_tickets(gw: Gateway, service_id: int) -> bool:
    return bool(gw.get(f"/api/v1/clients/{service_id}/tickets").json()["data"])


def ticketless_customer(gw: Gateway, *, technician: bool = True) -> dict[str, Any]:
    """An active customer with no open ticket (with or without a technician)."""
    rows = gw.get("/api/v1/clients/").json()["data"]
    for row in rows:
        if (
            row["phone"]
            and row["name"]
            and row["address"]
            and row["internet_plan_name"]
            and row["service_state"] == "active"
            and row["zone_id"] is not None
            and (row["technician_id"] is not None) == technician
            and not has_tickets(gw, row["service_id"])
        ):
            return customer(gw, row["service_id"])
    pytest.fail("no ticketless customer in the simulator's dataset")


async def open_verified_ticket(
    gw: Gateway, client: dict[str, Any], subject: str, description: str
) -> Result:
    """In one session: verify_customer as the customer states it, then open_ticket."""
    async with mcp_session(gw) as session:
        verified = await call(
            session, "verify_customer", service_id=client["service_id"], **statement(client)
        )
        return await open_ticket(session, verified.data["verification_id"], subject, description)


def test_each_tool_has_the_scope_of_the_table() -> None:
    """CALLERS.md 5's table: a credential without the scope neither lists nor calls it."""
    assert {spec.name: spec.scope for spec in TOOL_SPECS} == {
        "find_customer": "clients:read",
        "verify_customer": "clients:verify",
        "customer_summary": "clients:read",
        "customer_account": "accounts:read",
        "promise_payment": "payments:promise",
        "diagnose_connection": "network:ping",
        "customer_tickets": "tickets:read",
        "open_ticket": "tickets:write",
        "update_contact": "clients:write",
        "list_internet_plans": "plans:read",
        "internet_plan": "plans:read",
        "list_payment_methods": "accounts:read",
        "list_ticket_subjects": "tickets:read",
        "current_outages": "outages:read",
    }


async def test_tools_listed_with_the_order_in_their_descriptions(gateway: Gateway) -> None:
    async with mcp_session(gateway) as session:
        listed = (await session.list_tools()).tools
    assert {tool.name for tool in listed} == TOOLS
    for tool in listed:
        assert tool.description
        if tool.name.startswith("list_") or tool.name in ("internet_plan", "current_outages"):
            assert "no verification needed" in tool.description.lower()
            continue
        # Every customer tool tells the order: find, verify, then act.
        assert "find_customer" in tool.description
        assert "verify_customer" in tool.description
        if tool.name not in {"find_customer", "verify_customer"}:
            # Acts on the service inside the id; there is no way to name another.
            assert "verification_id" in tool.input_schema["properties"]
            assert "service_id" not in tool.input_schema["properties"]


async def test_no_internet_conversation(simulator: Simulator, start_gateway: StartGateway) -> None:
    """Find by phone, verify, diagnose, open a ticket: the zone and technician are the
    record's, and the same ticket again is the duplicate guard's answer."""
    gateway = start_gateway(simulator.url, MAX_ACTIVE_TICKETS_PER_ZONE=ROOMY)
    client = ticketless_customer(gateway)
    phone = client["phone"].split(",")[0]
    async with mcp_session(gateway, end_user="chat-4711") as session:
        found = await call(session, "find_customer", phone=f"+57 {phone}")
        assert not found.is_error
        assert found.data == {"service_ids": [client["service_id"]]}

        verified = await call(
            session, "verify_customer", service_id=client["service_id"], **statement(client)
        )
        assert not verified.is_error, verified.texts
        assert verified.data["verified"] is True
        assert verified.data["expires_in"] == 900
        vid = verified.data["verification_id"]

        diagnosis = await call(session, "diagnose_connection", verification_id=vid, wait=10)
        assert not diagnosis.is_error, diagnosis.texts
        assert diagnosis.data["service_id"] == client["service_id"]
        assert diagnosis.data["action"] in {
            "stable_connection",
            "intermittent_connection",
            "no_internet",
            "ping_pending",
        }
        assert diagnosis.sentence

        opened = await open_ticket(
            session,
            vid,
            "No Tiene Internet",
            "El cliente reporta que no tiene internet desde ayer.",
        )
        assert not opened.is_error, opened.texts
        assert opened.data["outcome"] == "ticket_created"
        ticket_id = opened.data["ticket"]["ticket_id"]
        assert str(ticket_id) in opened.sentence

        again = await open_ticket(session, vid, "No Tiene Internet", "Otra vez lo mismo.")
        assert not again.is_error
        assert again.data["outcome"] == "ticket_already_open"
        assert again.data["ticket"]["ticket_id"] == ticket_id

        listed = await call(session, "customer_tickets", verification_id=vid)
        assert [t["ticket_id"] for t in listed.data["tickets"]] == [ticket_id]

    detail = gateway.get(f"/api/v1/tickets/{ticket_id}").json()["data"]
    assert detail["service_id"] == client["service_id"]
    assert detail["technician_id"] == client["technician_id"]


async def test_what_do_i_owe_conversation(gateway: Gateway) -> None:
    client = pick_customer(gateway)
    async with mcp_session(gateway) as session:
        found = await call(session, "find_customer", document=client["document"])
        assert found.data == {"service_ids": [client["service_id"]]}
        verified = await call(
            session,
            "verify_customer",
            service_id=client["service_id"],
            name=client["name"],
            address=client["address"],
            plan_price=client["internet_plan_price"],
        )
        assert verified.data["verified"] is True, verified.texts
        account = await call(
            session, "customer_account", verification_id=verified.data["verification_id"]
        )
        summary = await call(
            session, "customer_summary", verification_id=verified.data["verification_id"]
        )
    assert not account.is_error, account.texts
    rest = gateway.get(f"/api/v1/clients/{client['service_id']}/account").json()["data"]
    assert account.data["service_id"] == client["service_id"]
    assert account.data["total_due"] == rest["total_due"]
    assert account.data["pending_invoices"] == rest["pending_invoices"]
    assert account.sentence
    assert summary.data["name"] == client["name"]
    assert summary.data["zone_id"] == client["zone_id"]
    assert summary.data["plan_name"] == client["internet_plan_name"]


async def test_zone_at_its_cap_is_an_outcome_not_a_ticket(
    simulator: Simulator, start_gateway: StartGateway
) -> None:
    """The zone of the record is capped exactly as REST caps it: with a cap of one and a
    ticket of a neighbour in the same zone, the agent's ticket is refused."""
    gateway = start_gateway(simulator.url, MAX_ACTIVE_TICKETS_PER_ZONE=1)
    client = ticketless_customer(gateway)
    rows = gateway.get("/api/v1/clients/").json()["data"]
    neighbour = next(
        r
        for r in rows
        if r["zone_id"] == client["zone_id"] and r["service_id"] != client["service_id"]
    )
    zone = gateway.get(f"/api/v1/tickets/zone-blocked/{client['zone_id']}").json()["data"]
    if not zone["is_blocked"]:
        filled = gateway.post(
            "/api/v1/tickets",
            json={
                "service_id": neighbour["service_id"],
                "subject": "Internet Lento",
                "description": "El vecino también.",
                "technician_id": client["technician_id"],
                "zone_id": client["zone_id"],
            },
        )
        assert filled.status_code == 201, filled.text
    opened = await open_verified_ticket(gateway, client, "No Tiene Internet", "Sin servicio.")
    assert not opened.is_error, opened.texts
    assert opened.data["outcome"] == "zone_ticket_limit_reached"
    assert opened.data["active_tickets"] >= opened.data["max_tickets"] == 1
    assert not has_tickets(gateway, client["service_id"])


@pytest.mark.parametrize("default_technician", [None, 11])
async def test_open_ticket_technician_from_record_or_default(
    simulator: Simulator, start_gateway: StartGateway, default_technician: int | None
) -> None:
    """A record with no technician: DEFAULT_TECHNICIAN_ID when set, else a tool error and
    no ticket."""
    gw = start_gateway(
        simulator.url,
        DEFAULT_TECHNICIAN_ID=default_technician,
        MAX_ACTIVE_TICKETS_PER_ZONE=ROOMY,
    )
    client = ticketless_customer(gw, technician=False)
    opened = await open_verified_ticket(gw, client, "Internet Lento", "Navega muy lento.")
    if default_technician is None:
        assert opened.is_error
        assert opened.data["error"] == "ticket_creation_failed"
        assert "técnico" in opened.sentence
        assert not has_tickets(gw, client["service_id"])
    else:
        assert not opened.is_error, opened.texts
        ticket_id = opened.data["ticket"]["ticket_id"]
        detail = gw.get(f"/api/v1/tickets/{ticket_id}").json()["data"]
        assert detail["technician_id"] == default_technician


async def test_update_contact_acts_on_the_verified_service(gateway: Gateway) -> None:
    client = pick_customer(gateway)
    async with mcp_session(gateway) as session:
        verified = await call(
            session, "verify_customer", service_id=client["service_id"], **statement(client)
        )
        updated = await call(
            session,
            "update_contact",
            verification_id=verified.data["verification_id"],
            phone="3209998877",
        )
        nothing = await call(
            session, "update_contact", verification_id=verified.data["verification_id"]
        )
    assert not updated.is_error, updated.texts
    assert updated.data == {"updated": {"phone": "3209998877"}}
    assert customer(gateway, client["service_id"])["phone"].startswith("3209998877")
    assert nothing.is_error
    assert nothing.data["error"] == "invalid_arguments"


async def test_catalogue_tools_need_no_verification(
    gateway: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with mcp_session(gateway) as session:
        plans = await call(session, "list_internet_plans")
        methods = await call(session, "list_payment_methods")
        subjects = await call(session, "list_ticket_subjects")
    # No line of the SDK's own per request in the service's log (the access log has one).
    assert not [r for r in caplog.records if r.name.startswith("mcp.")], caplog.text
    assert not (plans.is_error or methods.is_error or subjects.is_error)
    rest_plans = gateway.get("/api/v1/internet-plans/").json()["data"]
    # Each plan with its price and speeds (issue 28.6): REST's detail of the plan.
    assert [
        {k: p[k] for k in ("plan_id", "name", "type")} for p in plans.data["plans"]
    ] == rest_plans
    for plan in plans.data["plans"]:
        detail = gateway.get(f"/api/v1/internet-plans/{plan['plan_id']}").json()["data"]
        assert plan == detail
    assert methods.data["methods"] == gateway.get("/api/v1/payment-methods").json()["data"]
    assert "No Tiene Internet" in subjects.data["all"]


async def test_modern_protocol_client_is_served_and_guarded(gateway: Gateway) -> None:
    """The SDK's high-level Client negotiates the newest protocol (per-request envelopes,
    no handshake): the same credentials, tools and guard apply."""
    client = pick_customer(gateway)
    async with (
        httpx2.AsyncClient(headers=gateway.auth, timeout=30) as http,
        Client(streamable_http_client(f"{gateway.url}/mcp", http_client=http)) as agent,
    ):
        assert {tool.name for tool in (await agent.list_tools()).tools} == TOOLS
        found = await agent.call_tool("find_customer", {"service_id": client["service_id"]})
        assert found.structured_content["service_ids"] == [client["service_id"]]
        refused = await agent.call_tool("customer_summary", {"verification_id": "ver_nope"})
        assert refused.is_error
        assert refused.structured_content["error"] == "verification_required"


def test_mcp_needs_the_rest_credentials(gateway: Gateway) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    for auth in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic Ym90OmJvdA=="}):
        response = httpx.post(f"{gateway.url}/mcp", json=body, headers={**headers, **auth})
        assert response.status_code == 401
        assert response.json() == {"detail": "Could not validate credentials."}
        assert response.headers["WWW-Authenticate"] == "Bearer"
    bad_end_user = {**headers, **gateway.auth, "X-End-User-Id": "x" * 129}
    response = httpx.post(f"{gateway.url}/mcp", json=body, headers=bad_end_user)
    assert response.status_code == 422
    assert response.json()["action"] == "validation_error"
    assert USERNAME  # the gateway's token is for the spec's JWT user


def test_only_post_is_served(gateway: Gateway) -> None:
    """Stateless: a GET (a standalone event stream) or DELETE (ending a session) answers 405
    at once instead of holding a connection open for nothing."""
    headers = {**gateway.auth, "Accept": "application/json, text/event-stream"}
    for method in ("GET", "DELETE", "PUT"):
        response = httpx.request(method, f"{gateway.url}/mcp", headers=headers, timeout=5)
        assert response.status_code == 405, method
        assert "POST" in response.headers["Allow"]


def test_service_rate_limits_count_mcp_calls(
    simulator: Simulator, start_gateway: StartGateway
) -> None:
    """The per-subject limit of the REST API holds on /mcp too: an agent looping over a
    tool is slowed down like a bot looping over an endpoint."""
    gw = start_gateway(simulator.url, RATE_LIMIT_PER_SUBJECT_PER_MINUTE=3)
    body = tool_call("list_ticket_subjects")
    headers = {**gw.auth, "Accept": "application/json, text/event-stream"}
    statuses = [
        httpx.post(f"{gw.url}/mcp", json=body, headers=headers).status_code for _ in range(4)
    ]
    assert statuses[:3] == [200, 200, 200]
    assert statuses[3] == 429


def test_mcp_disabled_is_not_served(simulator: Simulator, start_gateway: StartGateway) -> None:
    gw = start_gateway(simulator.url, MCP_ENABLED=False)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = gw.post("/mcp", json=body)
    assert response.status_code == 404


async def test_open_ticket_is_counted_and_audited_like_rest(
    simulator: Simulator, start_gateway: StartGateway
) -> None:
    """The ticket service decides the outcome for both doors: an agent's ticket is one
    `ticket_create` event and one `created` in isp_gateway_tickets_total, as a REST one."""
    gw = start_gateway(simulator.url, MAX_ACTIVE_TICKETS_PER_ZONE=ROOMY)
    client = ticketless_customer(gw)
    opened = await open_verified_ticket(gw, client, "Internet Lento", "Navega muy lento.")
    assert not opened.is_error, opened.texts
    ticket_id = opened.data["ticket"]["ticket_id"]
    events = await gw.runtime.audit.query(event="ticket_create")
    assert [(e["outcome"], e["service_id"], e["details"]["ticket_id"]) for e in events] == [
        ("created", client["service_id"], ticket_id)
    ]
    scraped = gw.client.get("/metrics").text
    assert 'isp_gateway_tickets_total{outcome="created"} 1.0' in scraped
