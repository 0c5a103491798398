"""OUTAGE_TICKETS=hold (OUTAGES.md 4): a ticket for a service under an active general outage
answers 409 `info` `outage_in_progress` with the outage, and nothing reaches the upstream;
REST and MCP alike. `GET /api/v1/outages` and MCP `current_outages` read the same outages."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.agents.conftest import call, customer, mcp_session, statement
from tests.conftest import Gateway, Simulator, StartGateway
from tests.outages.conftest import ZONES_7, raise_outage, seen, watching
from tests.support import wait_for_age

pytestmark = pytest.mark.anyio

TICKET = {"subject": "No Tiene Internet", "description": "Sin servicio desde la mañana"}


def ticket_for(service_id: int, zone_id: int) -> dict[str, Any]:
    return {**TICKET, "service_id": service_id, "zone_id": zone_id, "technician_id": 11}


def posts(sim: Simulator) -> int:
    return sum(n for name, n in sim.state.calls.items() if name.startswith("POST /api/tickets"))


def held_gateway(sim: Simulator, start_gateway: StartGateway, **more: Any) -> Gateway:
    return watching(start_gateway(sim.url, OUTAGE_CACHE_SECONDS=1, OUTAGE_TICKETS="hold", **more))


@pytest.mark.parametrize("client_router", ["object", "absent"])
def test_a_ticket_under_an_outage_is_held_and_nothing_is_sent(
    sim: Simulator, start_gateway: StartGateway, client_router: str
) -> None:
    # Absent: the rows name no router; the service's router comes from the one-client read.
    sim.state.set_client_router(client_router)
    gw = held_gateway(sim, start_gateway)
    raise_outage(sim, 7, "Corte de fibra")
    [listed] = seen(gw)
    sim.state.reset_stats()
    response = gw.post("/api/v1/tickets", json=ticket_for(101, 1))
    body = response.json()
    assert response.status_code == 409, body
    assert (body["ok"], body["type"], body["action"]) == (False, "info", "outage_in_progress")
    assert body["message"]
    assert body["data"] == listed
    assert listed["description"] == "Corte de fibra" and listed["router_id"] == 7
    if client_router == "object":
        assert listed["zone_ids"] == ZONES_7 and listed["affected_count"] == 3
    else:
        assert listed["zone_ids"] == [] and listed["affected_count"] is None
    assert posts(sim) == 0 and sim.state.created_tickets == []
    # A service on another router is not held.
    assert gw.post("/api/v1/tickets", json=ticket_for(103, 2)).status_code == 201
    # The held request is audited as the creation's outcome.
    events = gw.get("/api/v1/audit", params={"event": "ticket_create"}).json()["data"]
    held = [e for e in events if e["outcome"] == "outage_in_progress"]
    assert held and held[0]["details"]["router_id"] == 7


def test_without_hold_the_spec_opens_the_ticket_during_an_outage(
    sim: Simulator, start_gateway: StartGateway
) -> None:
    gw = watching(start_gateway(sim.url, OUTAGE_CACHE_SECONDS=1))
    raise_outage(sim, 7)
    seen(gw)
    assert gw.post("/api/v1/tickets", json=ticket_for(101, 1)).status_code == 201


async def test_mcp_open_ticket_is_held_and_current_outages_says_so(
    sim: Simulator, start_gateway: StartGateway
) -> None:
    gw = held_gateway(sim, start_gateway)
    async with mcp_session(gw) as session:
        none = await call(session, "current_outages")
        assert (none.is_error, none.data) == (False, {"outages": []})
        assert none.sentence == "No hay fallas generales en este momento."
        raise_outage(sim, 7, "Corte de fibra.")
        seen(gw)
        sim.state.reset_stats()
        now = await call(session, "current_outages")
        [outage] = now.data["outages"]
        assert outage["router_id"] == 7 and outage["zone_ids"] == ZONES_7
        assert (
            now.sentence
            == "Hay una falla general en curso: Corte de fibra. Estamos trabajando en ello."
        )
        client = customer(gw, 105)
        verified = await call(session, "verify_customer", service_id=105, **statement(client))
        held = await call(
            session,
            "open_ticket",
            verification_id=verified.data["verification_id"],
            **TICKET,
        )
    assert held.is_error is False
    assert held.data == {"outcome": "outage_in_progress", "outage": outage}
    assert "falla general" in held.sentence
    assert posts(sim) == 0


def test_outages_answers_502_when_the_catalogue_cannot_be_read(
    sim: Simulator, start_gateway: StartGateway
) -> None:
    gw = watching(start_gateway(sim.url, OUTAGE_CACHE_SECONDS=1, UPSTREAM_TIMEOUT_SECONDS=1.0))
    sim.state.faults.update({"error_rate": 1.0, "path_prefix": "/api/router/"})
    # Until the copy is past OUTAGE_CACHE_SECONDS (a refresh may publish one just after the
    # faults are set): it is never served; its refreshes fail meanwhile.
    wait_for_age(gw.runtime.services.outages.catalogue, 1)
    response = gw.get("/api/v1/outages")
    assert response.status_code == 502, response.text
    assert response.json()["action"] == "upstream_unavailable"
    assert httpx.get(f"{gw.url}/health").status_code == 200
