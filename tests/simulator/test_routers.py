"""The router catalogue, per-router outage flags, and the router/technician row variants."""

from __future__ import annotations

from tests.simulator.conftest import SimServer


def test_router_catalogue_is_paginated_with_outage_flags(server: SimServer) -> None:
    page = server.client.get("/api/router/", params={"limit": 2}).json()
    assert page["count"] == len(server.sim.dataset.routers) and len(page["results"]) == 2
    row = page["results"][0]
    assert {"id", "nombre", "falla_general", "falla_general_descripcion"} <= set(row)
    assert row["falla_general"] is False
    # Never the router's credentials.
    assert "password_router" not in row and "usuario_router" not in row


def test_outages_switch_through_the_control_api(server: SimServer) -> None:
    router_id = server.sim.dataset.routers[0]["id"]
    with server.raw_client() as control:
        answer = control.put(
            "/_sim/routers", json={"router_id": router_id, "description": "Corte de fibra"}
        )
        assert answer.status_code == 200
        assert answer.json()["outages"] == {str(router_id): "Corte de fibra"}
        rows = server.client.get("/api/router/", params={"limit": 1000}).json()["results"]
        flagged = [r for r in rows if r["falla_general"]]
        assert [(r["id"], r["falla_general_descripcion"]) for r in flagged] == [
            (router_id, "Corte de fibra")
        ]
        # Ticket rows carry it in servicio.router.
        tickets = server.client.get("/api/tickets/", params={"limit": 1000}).json()["results"]
        on_router = [t for t in tickets if t["servicio"]["router"]["id"] == router_id]
        assert on_router and all(t["servicio"]["router"]["falla_general"] for t in on_router)
        others = [t for t in tickets if t["servicio"]["router"]["id"] != router_id]
        assert not any(t["servicio"]["router"]["falla_general"] for t in others)
        # Off again, and bad input refused.
        control.put("/_sim/routers", json={"router_id": router_id, "outage": False})
        assert control.get("/_sim/routers").json()["outages"] == {}
        assert control.put("/_sim/routers", json={"router_id": 99999}).status_code == 400
        assert control.put("/_sim/routers", json={"router_id": "1"}).status_code == 400


def test_client_rows_without_router_as_a_variant(server: SimServer) -> None:
    first = server.client.get("/api/clientes/", params={"limit": 1}).json()["results"][0]
    assert {"id", "nombre"} <= set(first["router"])
    with server.raw_client() as control:
        assert control.put("/_sim/routers", json={"client_router": "absent"}).status_code == 200
        row = server.client.get("/api/clientes/", params={"limit": 1}).json()["results"][0]
        assert "router" not in row
        # The one-client endpoint still names it.
        detail = server.client.get(f"/api/clientes/{row['id_servicio']}/").json()
        assert detail["router"]["id"] == first["router"]["id"]
        control.put("/_sim/routers", json={"reset": True})
    row = server.client.get("/api/clientes/", params={"limit": 1}).json()["results"][0]
    assert "router" in row


def test_ticket_rows_name_the_technician_by_email_too(server: SimServer) -> None:
    tickets = server.client.get("/api/tickets/", params={"limit": 1000}).json()["results"]
    assert all(t["email_tecnico"].endswith("@isp.example") for t in tickets)
    with server.raw_client() as control:
        control.put("/_sim/routers", json={"ticket_technician": "email"})
    tickets = server.client.get("/api/tickets/", params={"limit": 1000}).json()["results"]
    assert all(t["tecnico"] is None and t["email_tecnico"] for t in tickets)
