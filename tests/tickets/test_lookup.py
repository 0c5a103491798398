"""Get a ticket and a zone's status, read fresh from the upstream."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from isp_gateway.simulator import SimulatorConfig, create_simulator_app
from tests.conftest import API_KEY, Gateway, Simulator, StartGateway
from tests.support import assert_refused, run_server
from tests.tickets.conftest import ANSWERED_TICKET, settle


@pytest.mark.parametrize(
    ("zone_id", "active", "blocked"), [(1, 2, False), (2, 3, True), (3, 0, False), (4, 3, True)]
)
def test_zone_status_counts_active_tickets_over_every_page(
    gw_now: Gateway, sim: Simulator, zone_id: int, active: int, blocked: bool
) -> None:
    gw = gw_now  # the sweep is re-read at once (CALLERS.md: else at most 5 s old)
    settle(gw, sim)  # the count must not join the warm-up sweep (its calls were before)
    response = gw.get(f"/api/v1/tickets/zone-blocked/{zone_id}")
    assert response.status_code == 200
    body = response.json()
    assert (body["ok"], body["type"], body["action"]) == (True, "success", "ticket_found")
    assert body["data"] == {
        "zone_id": zone_id,
        "is_blocked": blocked,
        "active_tickets": active,
        "max_tickets": 3,
    }
    # 8 active tickets at 2 a page: every page was read, only in the active state.
    assert sim.state.calls["GET /api/tickets/"] >= 4


@pytest.mark.parametrize("labels", ["label", "number", "digit_string"])
def test_zone_count_reads_every_form_of_estado(gw: Gateway, sim: Simulator, labels: str) -> None:
    sim.state.variants.ticket_labels = labels
    assert gw.get("/api/v1/tickets/zone-blocked/2").json()["data"]["active_tickets"] == 3


def test_a_filter_the_upstream_ignores_still_counts_active_tickets_only(
    gw: Gateway, sim: Simulator
) -> None:
    # An account that ignores `estado` returns every ticket; the rows' own states decide.
    original = sim.state.filter_tickets
    sim.state.filter_tickets = lambda estados: original([])
    try:
        assert gw.get("/api/v1/tickets/zone-blocked/1").json()["data"]["active_tickets"] == 2
    finally:
        sim.state.filter_tickets = original


def test_active_states_and_cap_are_settings(sim: Simulator, start_gateway: StartGateway) -> None:
    gw = start_gateway(sim.url, ACTIVE_TICKET_STATES="1,2", MAX_ACTIVE_TICKETS_PER_ZONE=4)
    data = gw.get("/api/v1/tickets/zone-blocked/2").json()["data"]
    assert data == {"zone_id": 2, "is_blocked": True, "active_tickets": 4, "max_tickets": 4}
    data = gw.get("/api/v1/tickets/zone-blocked/3").json()["data"]
    assert (data["active_tickets"], data["is_blocked"]) == (1, False)


def test_get_ticket_with_its_latest_answer(gw: Gateway) -> None:
    response = gw.get(f"/api/v1/tickets/{ANSWERED_TICKET}")
    assert response.status_code == 200
    body = response.json()
    assert (body["ok"], body["action"]) == (True, "ticket_found")
    assert body["data"] == {
        "ticket_id": ANSWERED_TICKET,
        "subject": "No Tiene Internet",
        "created_at": "2026-02-02 09:15",
        "end_date": "2026-02-05 10:00",
        "status_ticket": "Resuelto",
        "priority": "3",
        "answer_text": "Antena cambiada, servicio restablecido",
        "service_id": 302,
        "description": "<p>Sin servicio</p>",
        "technician_id": None,
        "technician_name": "Carlos Ruiz",
    }


@pytest.mark.parametrize("labels", ["number", "digit_string"])
def test_get_ticket_when_the_upstream_sends_numbers_and_one_answer_object(
    gw: Gateway, sim: Simulator, labels: str
) -> None:
    sim.state.variants.ticket_labels = labels
    sim.state.variants.answers = "object"
    data = gw.get(f"/api/v1/tickets/{ANSWERED_TICKET}").json()["data"]
    assert data["answer_text"] == "Antena cambiada, servicio restablecido"
    assert (data["status_ticket"], data["priority"]) == ("Resuelto", "3")


def test_ticket_without_answers(gw: Gateway, sim: Simulator) -> None:
    sim.state.variants.answers = "object"
    data = gw.get("/api/v1/tickets/5001").json()["data"]
    assert (data["answer_text"], data["status_ticket"], data["priority"]) == (None, "Nuevo", "2")


def test_unknown_ticket_is_404(gw: Gateway, sim: Simulator) -> None:
    for ticket_id in (999999, 0):
        response = gw.get(f"/api/v1/tickets/{ticket_id}")
        assert response.status_code == 404
        body = response.json()
        assert (body["ok"], body["type"], body["action"], body["data"]) == (
            False,
            "error",
            "ticket_not_found",
            None,
        )


def test_non_numeric_ticket_id_is_a_validation_error(gw: Gateway) -> None:
    response = gw.get("/api/v1/tickets/abc")
    assert response.status_code == 422
    assert response.json()["action"] == "validation_error"


def test_upstream_down_is_502_never_not_found(
    start_gateway: StartGateway,
) -> None:
    gw = start_gateway("http://127.0.0.1:9", UPSTREAM_TIMEOUT_SECONDS=1.0)
    for path in ("/api/v1/tickets/5001", "/api/v1/tickets/zone-blocked/1"):
        response = gw.get(path)
        assert response.status_code == 502
        assert response.json()["action"] == "upstream_unavailable"


def test_upstream_403_and_429(gw_now: Gateway, sim: Simulator) -> None:
    gw = gw_now  # the zone status reads the upstream now (its sweep at most 1 ms old)
    sim.state.faults.force_403 = True
    for path in ("/api/v1/tickets/5001", "/api/v1/tickets/zone-blocked/1"):
        response = gw.get(path)
        assert response.status_code == 502
        body = response.json()
        assert body["action"] == "upstream_unauthorized"
        assert "test-upstream-key" not in response.text
    sim.state.faults.force_403 = False
    sim.state.faults.force_429 = True
    sim.state.faults.retry_after = 7
    response = gw.get("/api/v1/tickets/zone-blocked/1")
    assert_refused(response, 503, "upstream_rate_limited", retry_after="7")


def test_a_short_sweep_of_active_tickets_is_a_502_never_a_lower_count(
    gw_now: Gateway, sim: Simulator
) -> None:
    """Issue 17: a ticket page answering 200 with fewer rows than its `count` and `next:
    null` is a failed sweep: never fewer active tickets, never "not blocked". (A gateway
    that re-reads the sweep at once: a sweep younger than ZONE_SWEEP_FRESH_SECONDS would
    answer from the copy read before the fault.)"""
    gw = gw_now
    settle(gw, sim)
    sim.state.faults.update(
        {"short_page": True, "scopes": {"short_page": {"path_prefix": "/api/tickets/"}}}
    )
    for zone_id in (1, 2, 3):
        response = gw.get(f"/api/v1/tickets/zone-blocked/{zone_id}")
        assert response.status_code == 502, response.text
        assert response.json()["action"] == "upstream_unavailable"
    sim.state.faults.reset()
    assert gw.get("/api/v1/tickets/zone-blocked/2").json()["data"]["active_tickets"] == 3


class NotATicket:
    """In front of the simulator: one ticket read answers 200 with a JSON body that is not a
    ticket (a proxy's answer, an empty object)."""

    def __init__(self, app: ASGIApp, body: Any) -> None:
        self.app, self.body = app, json.dumps(body).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/api/tickets/5001/":
            await self.app(scope, receive, send)
            return
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": self.body})


@pytest.mark.parametrize("body", [{}, [], {"detail": "ok"}, {"id_ticket": "n/a"}])
def test_a_200_that_is_not_a_ticket_is_502_never_not_found(
    data_file: Path, start_gateway: StartGateway, body: Any
) -> None:
    app = create_simulator_app(SimulatorConfig(api_key=API_KEY, data_file=data_file))
    with run_server(NotATicket(app, body)) as url:
        gw = start_gateway(url)
        response = gw.get("/api/v1/tickets/5001")
        assert response.status_code == 502
        assert response.json()["action"] == "upstream_unavailable"
        # Other tickets are read as usual.
        assert gw.get("/api/v1/tickets/5002").status_code == 200
