"""A loop of zone checks costs at most one sweep of active tickets per
ZONE_SWEEP_FRESH_SECONDS, shared by every worker (CALLERS.md, "Reads that are whole...")."""

from __future__ import annotations

import math
import time

from tests.conftest import Gateway, Simulator, StartGateway
from tests.tickets.conftest import Run, settle, ticket_body


def sweeps(sim: Simulator) -> int:
    # The default page size holds every active ticket: one list read is one sweep.
    return int(sim.state.calls["GET /api/tickets/"])


def hammer(workers: list[Gateway], zones: list[int], calls: int = 100) -> float:
    """`calls` zone checks over about 6 s, round-robin over workers and zones; every one 200."""
    started = time.monotonic()
    for n in range(calls):
        response = workers[n % len(workers)].get(f"/api/v1/tickets/zone-blocked/{zones[n % 4]}")
        assert response.status_code == 200, response.text
        time.sleep(0.06)  # the pace of the traffic (a bot's), not a wait
    return time.monotonic() - started


def test_a_loop_of_zone_checks_costs_one_sweep_per_five_seconds(
    sim: Simulator, start_gateway: StartGateway
) -> None:
    gw = start_gateway(sim.url)
    settle(gw, sim)
    elapsed = hammer([gw], [1, 2, 3, 4])
    assert sweeps(sim) <= math.ceil(elapsed / 5) + 1, (sweeps(sim), elapsed)
    # Another caller still gets its answers, and the cap still holds at once: zone 1 has
    # one free slot; the ticket created is in the very next check, and the next creation
    # is refused without waiting for the sweep to age.
    created = gw.post("/api/v1/tickets", json=ticket_body())
    assert created.status_code == 201, created.text
    status = gw.get("/api/v1/tickets/zone-blocked/1").json()["data"]
    assert (status["active_tickets"], status["is_blocked"]) == (3, True)
    again = gw.post("/api/v1/tickets", json=ticket_body(service_id=102, description="otra"))
    assert again.json()["action"] == "zone_ticket_limit_reached"
    assert len(sim.state.created_tickets) == 1


def test_two_workers_share_one_sweep_per_five_seconds(
    run: Run, run_sim: Simulator, run_workers: list[Gateway]
) -> None:
    workers = run_workers
    for worker in workers:
        settle(worker, run_sim)
    elapsed = hammer(workers, [run.zone(z) for z in (1, 2, 3, 4)])
    assert sweeps(run_sim) <= math.ceil(elapsed / 5) + 1, (sweeps(run_sim), elapsed)
    # A ticket created through one worker is in the other's next check.
    created = workers[0].post("/api/v1/tickets", json=ticket_body(zone_id=run.zone(1)))
    assert created.status_code == 201, created.text
    status = workers[1].get(f"/api/v1/tickets/zone-blocked/{run.zone(1)}").json()["data"]
    assert (status["active_tickets"], status["is_blocked"]) == (3, True)
    refused = workers[1].post(
        "/api/v1/tickets", json=ticket_body(zone_id=run.zone(1), service_id=102, description="x")
    )
    assert refused.json()["action"] == "zone_ticket_limit_reached"
    assert len(run_sim.state.created_tickets) == 1
