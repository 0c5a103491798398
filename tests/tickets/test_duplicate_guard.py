"""One open ticket per service and subject (BEYOND.md), and no ticket for an unknown service."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.conftest import Gateway, Simulator, StartGateway
from tests.tickets.conftest import post_calls, ticket_body


def test_a_second_ticket_for_the_same_service_and_subject_is_refused_with_the_first(
    gw: Gateway, sim: Simulator
) -> None:
    first = gw.post("/api/v1/tickets", json=ticket_body(zone_id=3, service_id=301))
    assert first.status_code == 201
    again = gw.post(
        "/api/v1/tickets", json=ticket_body(zone_id=3, service_id=301, description="otra vez")
    )
    assert again.status_code == 409
    body = again.json()
    assert (body["ok"], body["type"], body["action"]) == (False, "info", "ticket_already_open")
    data = body["data"]
    assert data["ticket_id"] == first.json()["data"]["ticket_id"]
    assert set(data) == {
        "ticket_id",
        "subject",
        "status_ticket",
        "priority",
        "created_at",
        "end_date",
        "technician",
    }
    assert data["subject"] == "No Tiene Internet"
    assert post_calls(sim) == 1
    # Another subject, or another service, is another ticket.
    other = ticket_body(zone_id=3, service_id=301, subject="Internet Lento")
    assert gw.post("/api/v1/tickets", json=other).status_code == 201
    assert (
        gw.post("/api/v1/tickets", json=ticket_body(zone_id=3, service_id=302)).status_code == 201
    )


def test_an_open_ticket_opened_elsewhere_counts_in_any_stored_form(
    gw: Gateway, sim: Simulator
) -> None:
    # Zone 1's active tickets are "Internet Lento" for 101 and 102 (conftest); an account
    # stores the subject as "<subject> - <client name>".
    row = next(t for t in sim.state.dataset.tickets if t["estado"] == 1 and t["id_ticket"] == 5001)
    row["asunto"] = "Internet Lento - CLIENTE 101"
    response = gw.post("/api/v1/tickets", json=ticket_body(subject="Internet Lento"))
    assert response.status_code == 409
    assert response.json()["data"]["ticket_id"] == 5001
    assert post_calls(sim) == 0


def test_the_zone_cap_answers_before_the_guard(gw: Gateway, sim: Simulator) -> None:
    # Zone 2 is at its cap and service 201 has an open "Internet Lento": the spec's answer.
    response = gw.post(
        "/api/v1/tickets", json=ticket_body(zone_id=2, service_id=201, subject="Internet Lento")
    )
    assert response.status_code == 409
    assert response.json()["action"] == "zone_ticket_limit_reached"


def test_the_guard_can_be_turned_off(sim: Simulator, start_gateway: StartGateway) -> None:
    gw = start_gateway(sim.url, DUPLICATE_TICKET_GUARD=False)
    for _ in range(2):
        response = gw.post("/api/v1/tickets", json=ticket_body(zone_id=3, service_id=301))
        assert response.status_code == 201
    assert post_calls(sim) == 2


def test_ten_concurrent_identical_requests_open_one_ticket(gw: Gateway, sim: Simulator) -> None:
    def create(_: int) -> httpx.Response:
        return gw.post("/api/v1/tickets", json=ticket_body(zone_id=3, service_id=302))

    with ThreadPoolExecutor(10) as pool:
        responses = list(pool.map(create, range(10)))
    assert sorted(r.status_code for r in responses) == [201] + [409] * 9
    assert {r.json()["action"] for r in responses if r.status_code == 409} == {
        "ticket_already_open"
    }
    assert len(sim.state.created_tickets) == 1


def test_an_unknown_service_is_404_and_nothing_is_sent(gw: Gateway, sim: Simulator) -> None:
    response = gw.post("/api/v1/tickets", json=ticket_body(service_id=987654))
    assert response.status_code == 404
    assert response.json()["action"] == "client_not_found"
    assert post_calls(sim) == 0
    # The subject is checked first (it needs no upstream call).
    response = gw.post("/api/v1/tickets", json=ticket_body(service_id=987654, subject="Nada"))
    assert response.status_code == 400


def test_a_customer_added_upstream_since_the_list_loaded_gets_their_ticket(
    gw: Gateway, sim: Simulator
) -> None:
    assert gw.get("/api/v1/clients/by-service-id/101").status_code == 200  # list loaded
    sim.state.add_client(
        {
            "id_servicio": 303,
            "nombre": "CLIENTE NUEVO",
            "cedula": "10000303",
            "estado": "Activo",
            "zona": {"id": 3, "nombre": "Zona 3"},
        }
    )
    response = gw.post("/api/v1/tickets", json=ticket_body(zone_id=3, service_id=303))
    assert response.status_code == 201, response.text
    assert post_calls(sim) == 1
