"""GET /api/v1/clients/{id}/tickets: the client's active tickets from the cached sweep."""

from __future__ import annotations

from tests.conftest import Gateway, Simulator, StartGateway
from tests.diagnose.conftest import upstream_calls, warm


def test_active_tickets_newest_first_with_the_listed_fields(gw: Gateway, sim: Simulator) -> None:
    warm(gw, sim)
    response = gw.get("/api/v1/clients/101/tickets")
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["ok"], body["type"], body["action"]) == (True, "success", "tickets_listed")
    tickets = body["data"]
    # Newest creation first; 7001 and 7002 were created in the same minute: higher id first.
    # The resolved 7004 is not active.
    assert [t["ticket_id"] for t in tickets] == [7003, 7002, 7001]
    assert tickets[0] == {
        "ticket_id": 7003,
        "subject": "Internet Intermitente",
        "status_ticket": "Nuevo",
        "priority": "2",
        "created_at": "2026-02-03 08:00",
        "end_date": "2026-02-09 10:00",
        "technician": "Carlos Ruiz",
    }
    # Served from the cached sweep: no upstream call.
    assert upstream_calls(sim) == {}


def test_the_upstreams_client_filter_is_not_trusted(gw: Gateway, sim: Simulator) -> None:
    # The upstream ignores client filters and answers every ticket: matching is ours.
    warm(gw, sim)
    assert [t["ticket_id"] for t in gw.get("/api/v1/clients/104/tickets").json()["data"]] == [
        7006,
        7005,
        7008,
    ]
    assert gw.get("/api/v1/clients/105/tickets").json()["data"] == []


def test_technician_falls_back_to_email_tecnico(
    sim: Simulator, start_gateway: StartGateway
) -> None:
    sim.state.set_ticket_technician("email")
    gw = start_gateway(sim.url)
    tickets = gw.get("/api/v1/clients/103/tickets").json()["data"]
    assert [t["technician"] for t in tickets] == ["carlos.ruiz@isp.example"]


def test_unknown_and_malformed_service_ids(gw: Gateway, sim: Simulator) -> None:
    warm(gw, sim)
    response = gw.get("/api/v1/clients/999999/tickets")
    assert (response.status_code, response.json()["action"]) == (404, "client_not_found")
    response = gw.get("/api/v1/clients/12a/tickets")
    assert (response.status_code, response.json()["action"]) == (400, "invalid_service_id")


def test_a_created_ticket_is_listed_at_once_without_a_list_read(
    gw: Gateway, sim: Simulator
) -> None:
    warm(gw, sim)
    body = {
        "service_id": 105,
        "subject": "No Tiene Internet",
        "description": "Sin servicio",
        "technician_id": 11,
        "zone_id": 1,
    }
    created = gw.post("/api/v1/tickets", json=body)
    assert created.status_code == 201, created.text
    sim.state.reset_stats()
    tickets = gw.get("/api/v1/clients/105/tickets").json()["data"]
    assert [t["ticket_id"] for t in tickets] == [created.json()["data"]["ticket_id"]]
    assert tickets[0]["subject"] == "No Tiene Internet"
    assert upstream_calls(sim) == {}


def test_upstream_down_with_nothing_cached_is_502(start_gateway: StartGateway) -> None:
    gw = start_gateway("http://127.0.0.1:9", UPSTREAM_TIMEOUT_SECONDS=1.0)
    response = gw.get("/api/v1/clients/101/tickets")
    assert response.status_code == 502
