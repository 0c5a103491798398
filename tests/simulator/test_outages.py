"""General outages: raised and cleared through /_sim/routers or set from the start (config and
CLI), seen at once by the router catalogue the gateway reads (`GET /api/router/`)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from isp_gateway.simulator import add_simulator_arguments, config_from_args
from tests.simulator.conftest import SimServer, StartSim


def catalogue(server: SimServer) -> dict[int, dict[str, Any]]:
    rows = server.client.get("/api/router/", params={"limit": 1000}).json()["results"]
    return {row["id"]: row for row in rows}


def test_an_outage_raised_and_cleared_shows_in_the_next_catalogue_read(server: SimServer) -> None:
    router_id = server.sim.dataset.routers[1]["id"]
    assert not any(row["falla_general"] for row in catalogue(server).values())
    with server.raw_client() as control:
        raised = control.put(
            "/_sim/routers",
            json={"router_id": router_id, "outage": True, "description": "Corte de fibra"},
        )
        assert raised.status_code == 200
        row = catalogue(server)[router_id]
        assert (row["falla_general"], row["falla_general_descripcion"]) == (True, "Corte de fibra")
        assert row["nombre"] == server.sim.dataset.routers[1]["nombre"]
        # A new description replaces the old one; the flag stays up.
        control.put("/_sim/routers", json={"router_id": router_id, "description": "Reparado 18h"})
        assert catalogue(server)[router_id]["falla_general_descripcion"] == "Reparado 18h"
        control.put("/_sim/routers", json={"router_id": router_id, "outage": False})
    row = catalogue(server)[router_id]
    assert (row["falla_general"], row["falla_general_descripcion"]) == (False, "")


def test_clients_on_the_router_name_it(server: SimServer) -> None:
    """Client rows carry `router {id, nombre}`: what a notice's affected services are found by."""
    router = server.sim.dataset.routers[0]
    rows = server.client.get("/api/clientes/", params={"limit": 1000}).json()["results"]
    on_router = [r for r in rows if r["router"]["id"] == router["id"]]
    assert on_router and all(r["router"]["nombre"] == router["nombre"] for r in on_router)


def test_routers_can_start_in_outage(start_sim: StartSim) -> None:
    server = start_sim(clients=50, outages={2: "Troncal caída", 3: ""})
    rows = catalogue(server)
    flagged = {
        i: row["falla_general_descripcion"] for i, row in rows.items() if row["falla_general"]
    }
    assert flagged == {2: "Troncal caída", 3: ""}
    # Ticket rows on those routers say so too.
    tickets = server.client.get("/api/tickets/", params={"limit": 1000}).json()["results"]
    assert all(
        t["servicio"]["router"]["falla_general"] == (t["servicio"]["router"]["id"] in (2, 3))
        for t in tickets
    )
    # Cleared at runtime like any other.
    with server.raw_client() as control:
        control.put("/_sim/routers", json={"router_id": 2, "outage": False})
    assert not catalogue(server)[2]["falla_general"]


def test_client_rows_can_start_without_router(start_sim: StartSim) -> None:
    server = start_sim(clients=20, client_router="absent")
    row = server.client.get("/api/clientes/", params={"limit": 1}).json()["results"][0]
    assert "router" not in row
    with server.raw_client() as control:
        assert control.get("/_sim/routers").json()["client_router"] == "absent"


def test_an_unknown_start_up_router_fails_at_start_up(start_sim: StartSim) -> None:
    with pytest.raises(ValueError, match="unknown router 999"):
        start_sim(clients=20, outages={999: "x"})


def test_cli_flags_for_outages_and_client_rows() -> None:
    parser = argparse.ArgumentParser()
    add_simulator_arguments(parser)
    ns = parser.parse_args(
        ["--outage", "2:Corte de fibra: Tenjo", "--outage", "5", "--client-router", "absent"]
    )
    config = config_from_args(ns, "key")
    assert config.outages == {2: "Corte de fibra: Tenjo", 5: ""}
    assert config.client_router == "absent"
    defaults = config_from_args(parser.parse_args([]), "key")
    assert (defaults.outages, defaults.client_router) == ({}, "object")
    with pytest.raises(SystemExit):
        parser.parse_args(["--outage", "norte"])
