"""CALLERS.md 6 "Reads that are whole, everywhere": a per-value query of a lookup that
returns fewer rows than its `count` (issue 24: `{"count": 1, "results": [], "next": null}`)
is a failed read: never 404, never remembered as a miss (neither the negative cache nor the
MISS_RECHECK slot), and the answer is right again as soon as the backend answers whole."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.clients.conftest import StartPair, calls, row
from tests.clients.test_verify_update import verify
from tests.conftest import Gateway, Simulator, StartGateway, StartSimulator

NEW = 108  # a customer added upstream after the gateway cached its list
NEW_ROW = row(
    NEW,
    nombre="LUCIA MARTINEZ",
    cedula="55544433",
    telefono="3115550108",
    direccion="CALLE 9 # 8-7",
    zona={"id": 3, "nombre": "Norte"},
)
FACTS = {"name": "Lucia Martinez", "address": "Calle 9 8-7", "internet_plan_name": "plan 10mb"}
TICKET = {
    "service_id": NEW,
    "subject": "No Tiene Internet",
    "description": "Sin servicio desde ayer",
    "technician_id": 11,
    "zone_id": 3,
}

Ask = Callable[[Gateway], Any]
ASKS: dict[str, Ask] = {
    "by-service-id": lambda gw: gw.get(f"/api/v1/clients/by-service-id/{NEW}"),
    "by-document": lambda gw: gw.get("/api/v1/clients/by-document/55544433"),
    "by-phone": lambda gw: gw.get("/api/v1/clients/by-phone/3115550108"),
    "verify": lambda gw: verify(gw, NEW, FACTS),
    "account": lambda gw: gw.get(f"/api/v1/clients/{NEW}/account"),
    "ticket": lambda gw: gw.post("/api/v1/tickets", json=TICKET),
}
# What each answers once the backend answers whole again.
WHOLE = {"ticket": 201}


def short_pages(sim: Simulator) -> None:
    """Every page of the client list ends early: half its rows (none of one), `next: null`,
    the `count` unchanged."""
    sim.state.faults.update(
        {"short_page": True, "scopes": {"short_page": {"path_prefix": "/api/clientes/"}}}
    )


@pytest.mark.parametrize("name", list(ASKS))
def test_a_short_read_is_never_not_found(start_pair: StartPair, name: str) -> None:
    sim, gw = start_pair(NEGATIVE_CACHE_SECONDS=60, MISS_RECHECK_SECONDS=300)
    sim.state.add_client(NEW_ROW)
    short_pages(sim)
    ask = ASKS[name]
    for _ in range(3):
        response = ask(gw)
        assert response.status_code in (502, 503), response.text
        assert response.json()["action"] != "client_not_found"
    assert calls(sim) >= 1  # each lookup asked (nothing remembered the failed reads)
    # The backend answers whole again: the customer is found at once, the miss was never
    # remembered (neither for NEGATIVE_CACHE_SECONDS nor in the MISS_RECHECK slot).
    sim.state.faults.reset()
    response = ask(gw)
    assert response.status_code == WHOLE.get(name, 200), response.text


def test_a_short_read_before_the_first_load_is_never_not_found(
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
    data_file: Any,
) -> None:
    """No list loaded at all (every load is short too): the lookups ask the value itself."""
    sim = start_simulator(data_file=data_file)
    short_pages(sim)
    gw = start_gateway(sim.url, NEGATIVE_CACHE_SECONDS=60, UPSTREAM_PAGE_RETRY_SECONDS=0.05)
    for path in ("by-service-id/101", "by-document/12345678", "by-phone/3001234567"):
        response = gw.get(f"/api/v1/clients/{path}")
        assert response.status_code == 502, response.text
        assert response.json()["action"] == "upstream_unavailable"
    sim.state.faults.reset()
    for path in ("by-service-id/101", "by-document/12345678", "by-phone/3001234567"):
        assert gw.get(f"/api/v1/clients/{path}").status_code == 200


def test_a_page_ending_before_its_count_with_rows_is_a_failed_read(start_pair: StartPair) -> None:
    """Two clients share the document and the answer holds one of them with `next: null`:
    the other services must not be reported as none (`meta.other_service_ids`)."""
    sim, gw = start_pair()
    sim.state.add_client(NEW_ROW)
    sim.state.add_client(row(109, cedula="55544433", telefono="3115550109"))
    short_pages(sim)
    response = gw.get("/api/v1/clients/by-document/55544433")
    assert response.status_code == 502, response.text
    sim.state.faults.reset()
    response = gw.get("/api/v1/clients/by-document/55544433")
    assert response.status_code == 200
    assert response.json()["meta"] == {"other_service_ids": [109]}
