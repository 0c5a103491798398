"""The zone capped is the client record's, never the caller's word (CALLERS.md 2, "Zone cap"):
in one process and on two workers sharing a real Redis."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from tests.conftest import Gateway, Simulator, StartGateway, StartSimulator
from tests.tickets.conftest import Run, build_dataset, post_calls, settle, ticket_body

ZONELESS = 901


def test_a_full_zone_is_not_escaped_by_naming_another(gw: Gateway, sim: Simulator) -> None:
    # Service 201 lives in zone 2 (3 of 3); zone 3 is empty.
    response = gw.post("/api/v1/tickets", json=ticket_body(service_id=201, zone_id=3))
    assert response.status_code == 422, response.text
    body = response.json()
    assert (body["ok"], body["action"], body["data"]) == (False, "zone_mismatch", {"zone_id": 2})
    assert "{" not in body["message"]
    assert post_calls(sim) == 0
    # Its real zone still holds 3, and naming it answers the cap.
    assert gw.get("/api/v1/tickets/zone-blocked/2").json()["data"]["active_tickets"] == 3
    capped = gw.post("/api/v1/tickets", json=ticket_body(service_id=201, zone_id=2))
    assert capped.json()["action"] == "zone_ticket_limit_reached"
    assert post_calls(sim) == 0


def test_the_zone_match_is_checked_after_the_subject_and_before_the_cap(
    gw: Gateway, sim: Simulator
) -> None:
    bad_subject = ticket_body(service_id=201, zone_id=3, subject="Nada que ver")
    assert gw.post("/api/v1/tickets", json=bad_subject).status_code == 400
    # A mismatch in a full zone: 422, not the cap's 409.
    assert (
        gw.post("/api/v1/tickets", json=ticket_body(service_id=201, zone_id=1)).status_code == 422
    )
    assert post_calls(sim) == 0


def test_ten_creations_naming_ten_zones_open_one_ticket(gw: Gateway, sim: Simulator) -> None:
    def create(zone_id: int) -> httpx.Response:
        return gw.post("/api/v1/tickets", json=ticket_body(service_id=302, zone_id=zone_id))

    with ThreadPoolExecutor(10) as pool:
        responses = list(pool.map(create, range(1, 11)))
    assert [r.status_code for r in responses].count(201) == 1
    assert {r.json()["action"] for r in responses if r.status_code == 422} == {"zone_mismatch"}
    assert len(sim.state.created_tickets) == 1


def _zoneless_sim(tmp_path: Path, start_simulator: StartSimulator) -> Simulator:
    data = build_dataset()
    client = dict(data["clients"][0], id_servicio=ZONELESS, nombre="SIN ZONA")
    client["zona"] = None
    data["clients"].append(client)
    path = tmp_path / "zoneless.json"
    path.write_text(json.dumps(data, ensure_ascii=False), "utf-8")
    return start_simulator(data_file=path)


def test_a_record_with_no_zone_uses_the_body_zone_and_keeps_one_ticket(
    tmp_path: Path,
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
) -> None:
    sim = _zoneless_sim(tmp_path, start_simulator)
    gw = start_gateway(sim.url)

    def create(zone_id: int) -> httpx.Response:
        return gw.post("/api/v1/tickets", json=ticket_body(service_id=ZONELESS, zone_id=zone_id))

    # Zones with room (an empty one and zones nobody is in): only the guard can refuse.
    with ThreadPoolExecutor(10) as pool:
        responses = list(pool.map(create, [3, *range(100, 109)]))
    codes = sorted(r.status_code for r in responses)
    assert codes == [201] + [409] * 9, [r.text for r in responses]
    assert {r.json()["action"] for r in responses if r.status_code == 409} == {
        "ticket_already_open"
    }
    assert len(sim.state.created_tickets) == 1


def test_two_workers_refuse_a_named_zone_that_is_not_the_record_s(
    run: Run, run_sim: Simulator, run_workers: list[Gateway]
) -> None:
    workers = run_workers

    def create(n: int) -> httpx.Response:
        body = ticket_body(service_id=201, zone_id=run.zone(3), description=f"r{n}")
        return workers[n % 2].post("/api/v1/tickets", json=body)

    with ThreadPoolExecutor(6) as pool:
        responses = list(pool.map(create, range(6)))
    assert {r.status_code for r in responses} == {422}
    assert {r.json()["data"]["zone_id"] for r in responses} == {run.zone(2)}
    assert post_calls(run_sim) == 0
    for worker in workers:
        status = worker.get(f"/api/v1/tickets/zone-blocked/{run.zone(2)}").json()["data"]
        assert status["active_tickets"] == 3


def test_two_workers_ten_zones_one_service_open_one_ticket(
    run: Run, run_sim: Simulator, run_workers: list[Gateway]
) -> None:
    workers = run_workers
    zones = [run.zone(z) for z in range(1, 11)]

    def create(n: int) -> httpx.Response:
        body = ticket_body(service_id=302, zone_id=zones[n])
        return workers[n % 2].post("/api/v1/tickets", json=body)

    with ThreadPoolExecutor(10) as pool:
        responses = list(pool.map(create, range(10)))
    assert [r.status_code for r in responses].count(201) == 1
    assert len(run_sim.state.created_tickets) == 1


def test_the_zone_mismatch_is_declared_in_openapi(gw: Gateway) -> None:
    operation = gw.client.get("/openapi.json").json()["paths"]["/api/v1/tickets"]["post"]
    unprocessable = operation["responses"]["422"]
    assert "zone_mismatch" in unprocessable["description"]
    assert "zone_mismatch" in json.dumps(unprocessable["content"])


def test_a_service_id_past_ten_digits_is_400_and_never_asked_upstream(
    gw: Gateway, sim: Simulator
) -> None:
    # CALLERS.md 2: on every service-id route, ticket creation's body included; each such
    # id cost an upstream read of the client list (a 404 after it), one per distinct value.
    settle(gw, sim)
    for service_id in (12345678901, 10**30):
        response = gw.post("/api/v1/tickets", json=ticket_body(service_id=service_id))
        assert response.status_code == 400, response.text
        assert response.json()["action"] == "invalid_service_id"
    assert sim.state.stats()["total"] == 0
