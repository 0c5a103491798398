"""Ticket creation: the Ticket of spec 2.3, the atomic zone cap, upstream failures."""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import httpx

from isp_gateway.tickets.calendar import add_business_days
from tests.conftest import Gateway, Simulator
from tests.tickets.conftest import post_calls, ticket_body, ticket_calls

MOMENT = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}$")


def test_created_ticket_is_201_with_the_spec_shape(gw: Gateway, sim: Simulator) -> None:
    before = datetime.now(ZoneInfo("America/Bogota")).replace(second=0, microsecond=0)
    response = gw.post("/api/v1/tickets", json=ticket_body())
    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["ok"], body["type"], body["action"]) == (True, "success", "ticket_created")
    assert (body["message"], body["meta"]) == (None, None)
    data = body["data"]
    assert set(data) == {
        "ticket_id",
        "subject",
        "created_at",
        "end_date",
        "status_ticket",
        "priority",
        "answer_text",
    }
    created = sim.state.created_tickets
    assert len(created) == 1
    assert data["ticket_id"] == created[0]["id_ticket"]
    assert data["subject"] == "No Tiene Internet"
    assert (data["status_ticket"], data["priority"], data["answer_text"]) == ("Nuevo", "3", None)
    assert MOMENT.match(data["created_at"]) and MOMENT.match(data["end_date"])
    created_at = datetime.strptime(data["created_at"], "%Y-%m-%d %H:%M").replace(
        tzinfo=ZoneInfo("America/Bogota")
    )
    assert before <= created_at <= before + timedelta(minutes=2)
    expected_end = add_business_days(created_at, 3, "CO")
    assert data["end_date"] == expected_end.strftime("%Y-%m-%d %H:%M")
    # What the upstream received: the catalogue subject twice, the dates it parses.
    row = created[0]
    assert row["servicio"]["id_servicio"] == 101
    assert row["estado"] == 1 and row["prioridad"] == 3
    assert row["departamento"] == "Soporte Técnico"
    assert row["fecha_estimada_fin"] == data["end_date"]
    assert row["descripcion"] == "El cliente no tiene servicio desde ayer"
    # The zone is now at its cap.
    zone = gw.get("/api/v1/tickets/zone-blocked/1").json()["data"]
    assert (zone["active_tickets"], zone["is_blocked"]) == (3, True)
    # And the ticket can be read back, with the technician id we sent.
    detail = gw.get(f"/api/v1/tickets/{data['ticket_id']}").json()["data"]
    assert detail["technician_id"] == 11
    assert (detail["service_id"], detail["status_ticket"]) == (101, "Nuevo")


def test_trailing_slash_form_creates_without_redirect(gw: Gateway, sim: Simulator) -> None:
    response = gw.post("/api/v1/tickets/", json=ticket_body(zone_id=3, service_id=301))
    assert response.status_code == 201
    assert len(sim.state.created_tickets) == 1


def test_zone_at_its_limit_is_409_info(gw: Gateway, sim: Simulator) -> None:
    response = gw.post("/api/v1/tickets", json=ticket_body(zone_id=2, service_id=201))
    assert response.status_code == 409
    body = response.json()
    assert (body["ok"], body["type"], body["action"]) == (
        False,
        "info",
        "zone_ticket_limit_reached",
    )
    assert body["data"] == {"max_tickets": 3, "active_tickets": 3}
    assert post_calls(sim) == 0


def test_closed_and_resolved_tickets_do_not_count(gw: Gateway, sim: Simulator) -> None:
    # Zone 3 has only in-progress, resolved and closed tickets: three slots are free.
    for n in range(3):
        response = gw.post("/api/v1/tickets", json=ticket_body(zone_id=3, service_id=301 + n % 2))
        assert response.status_code == 201, response.text
    response = gw.post("/api/v1/tickets", json=ticket_body(zone_id=3, service_id=301))
    assert response.status_code == 409
    assert len(sim.state.created_tickets) == 3


def test_twenty_concurrent_creates_at_one_free_slot_create_one_ticket(
    gw: Gateway, sim: Simulator
) -> None:
    def create(n: int) -> httpx.Response:
        return gw.post("/api/v1/tickets", json=ticket_body(description=f"report {n}"))

    with ThreadPoolExecutor(20) as pool:
        responses = list(pool.map(create, range(20)))
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [201] + [409] * 19
    assert len(sim.state.created_tickets) == 1
    assert post_calls(sim) == 1


def test_validation_errors_are_422(gw: Gateway, sim: Simulator) -> None:
    body = ticket_body()
    del body["zone_id"]
    response = gw.post("/api/v1/tickets", json=body)
    assert response.status_code == 422
    assert response.json()["action"] == "validation_error"
    response = gw.post("/api/v1/tickets", json=ticket_body(service_id="abc"))
    assert response.status_code == 422
    assert ticket_calls(sim) == 0


def test_upstream_field_errors_are_502_with_a_safe_summary(gw: Gateway, sim: Simulator) -> None:
    response = gw.post("/api/v1/tickets", json=ticket_body(technician_id=999))
    assert response.status_code == 502
    body = response.json()
    assert (body["ok"], body["action"], body["data"]) == (False, "ticket_creation_failed", None)
    assert body["meta"]["reason"] == "upstream_rejected"
    assert body["meta"]["errors"][0]["field"] == "technician_id"
    assert "technician_id" in body["message"]
    assert post_calls(sim) == 1
    assert sim.state.created_tickets == []


def test_upstream_403_on_create_is_502_and_creates_nothing(gw: Gateway, sim: Simulator) -> None:
    sim.state.faults.force_403 = True
    response = gw.post("/api/v1/tickets", json=ticket_body())
    assert response.status_code == 502
    body = response.json()
    assert (body["action"], body["meta"]["reason"]) == (
        "ticket_creation_failed",
        "upstream_unauthorized",
    )
    assert "test-upstream-key" not in response.text
    assert sim.state.created_tickets == []


def test_upstream_403_on_the_post_only(gw: Gateway, sim: Simulator) -> None:
    sim.state.faults.force_403 = True
    sim.state.faults.method = "POST"
    response = gw.post("/api/v1/tickets", json=ticket_body())
    assert response.status_code == 502
    assert response.json()["meta"]["reason"] == "upstream_unauthorized"
    assert post_calls(sim) == 1


def test_upstream_429_on_create_is_503_with_retry_after(gw: Gateway, sim: Simulator) -> None:
    sim.state.faults.force_429 = True
    sim.state.faults.retry_after = 12
    response = gw.post("/api/v1/tickets", json=ticket_body())
    assert response.status_code == 503
    assert response.json()["action"] == "ticket_creation_failed"
    assert response.headers["Retry-After"] == "12"


def test_upstream_down_is_502_ticket_creation_failed(
    start_gateway: Callable[..., Gateway],
) -> None:
    gw = start_gateway("http://127.0.0.1:9", UPSTREAM_TIMEOUT_SECONDS=1.0)
    response = gw.post("/api/v1/tickets", json=ticket_body())
    assert response.status_code == 502
    body = response.json()
    assert (body["action"], body["meta"]["reason"]) == (
        "ticket_creation_failed",
        "upstream_unavailable",
    )


def test_a_failed_post_is_not_retried_and_a_repeat_creates_one(gw: Gateway, sim: Simulator) -> None:
    faults = sim.state.faults
    faults.error_rate = 1.0
    faults.method, faults.path_prefix = "POST", "/api/tickets/"
    response = gw.post("/api/v1/tickets", json=ticket_body())
    assert response.status_code == 502
    assert response.json()["meta"]["reason"] == "outcome_unknown"
    assert post_calls(sim) == 1  # never repeated inside the request
    faults.reset()
    # The 500 created nothing here: the identical repeat looks, finds nothing, creates one.
    again = gw.post("/api/v1/tickets", json=ticket_body())
    assert again.status_code == 201
    assert len(sim.state.created_tickets) == 1
    assert post_calls(sim) == 2


def test_a_post_that_timed_out_is_never_posted_twice(
    sim: Simulator, start_gateway: Callable[..., Gateway]
) -> None:
    gw = start_gateway(sim.url, UPSTREAM_TIMEOUT_SECONDS=0.5)
    faults = sim.state.faults
    faults.hang_rate, faults.hang_seconds = 1.0, 5.0
    faults.method, faults.path_prefix = "POST", "/api/tickets/"
    response = gw.post("/api/v1/tickets", json=ticket_body())
    assert response.status_code == 502
    assert response.json()["meta"]["reason"] == "outcome_unknown"
    assert post_calls(sim) == 1


def test_unknown_service_refused_upstream_names_our_field(gw: Gateway, sim: Simulator) -> None:
    response = gw.post("/api/v1/tickets", json=ticket_body(service_id=987654))
    assert response.status_code == 502
    body = response.json()
    assert [e["field"] for e in body["meta"]["errors"]] == ["service_id"]
    assert "servicio" not in response.text and "{" not in body["message"]
    assert sim.state.created_tickets == []
