"""A list of active tickets that comes back empty while the tickets it listed are still open
is a failed read (CALLERS.md 2, "Reads that are whole"), never "no active ticket": taken, it
would lift every zone's cap, hide every open ticket from the duplicate guard and tell a bot
that the customer has none."""

from __future__ import annotations

import pytest

from tests.conftest import Gateway, Simulator
from tests.tickets.conftest import post_calls, settle, ticket_body


def blank_ticket_lists(sim: Simulator, mode: str) -> None:
    """The ticket list answered 200 with no rows (`[]` or a page counting 0); one ticket's
    own route still answers."""
    sim.state.faults.update(
        {"blank_list": mode, "scopes": {"blank_list": {"path_prefix": "/api/tickets/"}}}
    )


@pytest.mark.parametrize("mode", ["bare", "paged"])
def test_a_blank_list_while_tickets_are_open_is_a_failed_read(
    gw_now: Gateway, sim: Simulator, mode: str
) -> None:
    gw = gw_now  # each count re-reads the list
    settle(gw, sim)
    assert gw.get("/api/v1/tickets/zone-blocked/2").json()["data"]["is_blocked"] is True
    blank_ticket_lists(sim, mode)
    status = gw.get("/api/v1/tickets/zone-blocked/2")
    assert status.status_code == 502, status.text
    assert status.json()["action"] == "upstream_unavailable"
    # Zone 2 is full: nothing is created there on the word of an empty list.
    created = gw.post("/api/v1/tickets", json=ticket_body(zone_id=2, service_id=202))
    assert created.status_code == 502, created.text
    assert created.json()["action"] == "ticket_creation_failed"
    assert post_calls(sim) == 0
    assert not sim.state.created_tickets
    # The customer's open tickets are still told (the last whole sweep), never "none".
    listed = gw.get("/api/v1/clients/201/tickets")
    assert listed.status_code == 200, listed.text
    assert listed.json()["data"]
    # A whole list again: the zone is full, as it was all along.
    sim.state.faults.reset()
    assert gw.get("/api/v1/tickets/zone-blocked/2").json()["data"]["active_tickets"] == 3


def test_an_empty_list_is_taken_when_the_tickets_it_listed_are_closed(
    gw_now: Gateway, sim: Simulator
) -> None:
    gw = gw_now
    settle(gw, sim)
    for row in sim.state.dataset.tickets:
        if row["estado"] == 1:
            row["estado"] = 3  # Resuelto: every active ticket really is gone
    for zone_id in (1, 2, 4):
        zone = gw.get(f"/api/v1/tickets/zone-blocked/{zone_id}")
        assert zone.status_code == 200, zone.text
        assert zone.json()["data"]["active_tickets"] == 0
    created = gw.post("/api/v1/tickets", json=ticket_body(zone_id=2, service_id=202))
    assert created.status_code == 201, created.text
