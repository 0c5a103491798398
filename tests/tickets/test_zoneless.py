"""CALLERS.md 6 "Zones for records without one": a ticket for a service whose record has no
zone, counted in the zone the request named, stays counted there until the ticket sweep
shows it closed, however many sweeps run in between (issue 24: counted for about 5 s only,
so 7 tickets went into a zone capped at 3 within 90 s). Two workers sharing a real Redis,
every zone count read from a fresh sweep of the backend."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import Gateway, Simulator, StartGateway, StartSimulator
from tests.support import data_file_of
from tests.tickets.conftest import TECH, Run, ticket_body

ZONELESS = list(range(9001, 9008))  # seven services whose records name no zone


def _zoneless_workers(
    run: Run,
    tmp_path: Path,
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
) -> tuple[Simulator, list[Gateway]]:
    data = run.dataset()
    for service_id in ZONELESS:
        data["clients"].append(
            {
                "id_servicio": service_id,
                "nombre": f"CLIENTE {service_id}",
                "cedula": str(20_000_000 + service_id),
                "telefono": "3001234567",
                "direccion": "VEREDA SIN ZONA",
                "estado": "Activo",
                "zona": None,
                "tecnico": TECH,
            }
        )
    sim = start_simulator(data_file=data_file_of(tmp_path / "zoneless.json", data))
    workers = [
        start_gateway(sim.url, REDIS_URL=run.redis_url, ZONE_SWEEP_FRESH_SECONDS=0.001)
        for _ in range(2)
    ]
    return sim, workers


def test_zoneless_tickets_stay_counted_in_the_zone_they_named(
    run: Run,
    tmp_path: Path,
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
) -> None:
    sim, workers = _zoneless_workers(run, tmp_path, start_simulator, start_gateway)
    zone = run.zone(3)  # no active ticket; the cap is 3
    statuses = []
    for n, service_id in enumerate(ZONELESS):
        gw = workers[n % 2]
        response = gw.post("/api/v1/tickets", json=ticket_body(service_id=service_id, zone_id=zone))
        statuses.append(response.status_code)
        if response.status_code == 409:
            assert response.json()["action"] == "zone_ticket_limit_reached", response.text
    # Every count read a new sweep, where the tickets list no zone: they count all the same.
    assert statuses == [201, 201, 201, 409, 409, 409, 409]
    status = workers[0].get(f"/api/v1/tickets/zone-blocked/{zone}").json()["data"]
    assert (status["active_tickets"], status["is_blocked"]) == (3, True)
    # One is closed upstream: the next sweep shows it, and the zone has room for one more.
    sim.state.created_tickets[0]["estado"] = 4  # Cerrado
    response = workers[1].post(
        "/api/v1/tickets", json=ticket_body(service_id=ZONELESS[3], zone_id=zone)
    )
    assert response.status_code == 201, response.text
