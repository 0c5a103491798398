"""Tickets over HTTP: listing quirks, label and answer variants, creation and its validation."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from isp_gateway.simulator.dataset import load_subjects
from tests.simulator.conftest import SimServer


def _tickets(server: SimServer, params: Any = None) -> dict[str, Any]:
    response = server.client.get("/api/tickets/", params=params)
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


def _valid_ticket(server: SimServer) -> dict[str, str]:
    client = server.sim.dataset.clients[0]
    return {
        "servicio": str(client["id_servicio"]),
        "asunto": "Internet Lento",
        "asuntos_default": "Internet Lento",
        "tecnico": str(server.sim.dataset.staff[0]["id"]),
        "descripcion": "Cliente reporta lentitud",
        "estado": "1",
        "prioridad": "2",
        "fecha_inicio": "26/02/2026 10:00",
        "fecha_final": "03/03/2026 10:00",
        "departamento": "Soporte Técnico",
        "departamentos_default": "Soporte Técnico",
        "origen_reporte": "whatsapp",
    }


def test_list_spans_pages_and_has_every_state(server: SimServer) -> None:
    first = _tickets(server, {"limit": 100})
    assert first["count"] == 300 and len(first["results"]) == 100
    assert first["next"] == f"{server.url}/api/tickets/?limit=100&offset=100"
    everything = _tickets(server, {"limit": 1000})["results"]
    assert {t["estado"] for t in everything} == {"Nuevo", "En Progreso", "Resuelto", "Cerrado"}
    assert {t["prioridad"] for t in everything} <= {"Baja", "Normal", "Alta", "Muy Alta"}
    row = everything[0]
    for name in [
        "id_ticket",
        "asunto",
        "descripcion",
        "estado",
        "prioridad",
        "fecha_creacion",
        "fecha_estimada_inicio",
        "fecha_estimada_fin",
        "tecnico",
        "departamento",
        "servicio",
    ]:
        assert name in row
    assert "respuestas" not in row
    assert set(row["servicio"]) >= {"id_servicio", "nombre", "zona", "router"}
    assert row["servicio"]["router"]["falla_general"] is False
    assert any("<" in t["descripcion"] for t in everything)
    assert any(t["tecnico"] is None for t in everything)


def test_estado_filter_numbers_repeated_and_comma(server: SimServer) -> None:
    stored = Counter(t["estado"] for t in server.sim.dataset.tickets)
    assert _tickets(server, {"estado": "1"})["count"] == stored[1]
    both = stored[1] + stored[2]
    assert _tickets(server, [("estado", "1"), ("estado", "2")])["count"] == both
    assert _tickets(server, {"estado": "1,2"})["count"] == both
    rows = _tickets(server, {"estado": "3", "limit": 1000})["results"]
    assert {t["estado"] for t in rows} == {"Resuelto"}


@pytest.mark.parametrize("value", ["Nuevo", "abierto", "1,x"])
def test_text_estado_returns_nothing(server: SimServer, value: str) -> None:
    assert _tickets(server, {"estado": value})["count"] == 0


@pytest.mark.parametrize(
    "name", ["servicio", "id_servicio", "zona", "prioridad", "tecnico", "departamento"]
)
def test_other_ticket_filters_are_ignored(server: SimServer, name: str) -> None:
    assert _tickets(server, {name: "1"})["count"] == 300


@pytest.mark.parametrize(
    ("style", "estado", "prioridad"),
    [("label", "Nuevo", "Alta"), ("number", 1, 3), ("digit_string", "1", "3")],
)
def test_ticket_label_variants(
    server: SimServer, style: str, estado: object, prioridad: object
) -> None:
    ticket = next(t for t in server.sim.dataset.tickets if t["estado"] == 1 and t["prioridad"] == 3)
    assert server.client.put(
        f"{server.url}/_sim/variants", json={"ticket_labels": style}
    ).is_success
    row = server.client.get(f"/api/tickets/{ticket['id_ticket']}/").json()
    assert (row["estado"], row["prioridad"]) == (estado, prioridad)
    listed = _tickets(server, {"estado": "1", "limit": 1000})["results"]
    assert {t["estado"] for t in listed} == {estado}


def test_detail_answers_as_list_or_object(server: SimServer) -> None:
    ticket = next(t for t in server.sim.dataset.tickets if len(t["respuestas"]) >= 2)
    url = f"/api/tickets/{ticket['id_ticket']}/"
    answers = server.client.get(url).json()["respuestas"]
    assert answers == ticket["respuestas"]
    assert answers[-1]["fecha"] > answers[0]["fecha"]  # newest last
    server.sim.variants.answers = "object"
    assert server.client.get(url).json()["respuestas"] == ticket["respuestas"][-1]
    empty = next(t for t in server.sim.dataset.tickets if not t["respuestas"])
    assert server.client.get(f"/api/tickets/{empty['id_ticket']}/").json()["respuestas"] is None
    assert server.client.get("/api/tickets/99999/").status_code == 404


def test_create_with_multipart_form(server: SimServer) -> None:
    form = _valid_ticket(server)
    # files= forces multipart/form-data, as the upstream's own clients send it.
    response = server.client.post(
        "/api/tickets/", data=form, files={"adjunto": ("a.txt", b"x", "text/plain")}
    )
    assert response.status_code == 201, response.text
    row = response.json()
    assert row["asunto"] == "Internet Lento" and row["estado"] == "Nuevo"
    assert row["prioridad"] == "Normal"
    assert row["fecha_estimada_inicio"] == "2026-02-26 10:00"
    assert row["fecha_estimada_fin"] == "2026-03-03 10:00"
    assert row["servicio"]["id_servicio"] == int(form["servicio"])
    assert row["id_ticket"] > max(t["id_ticket"] for t in server.sim.dataset.tickets[:-1])
    assert len(server.sim.created_tickets) == 1
    assert _tickets(server)["count"] == 301
    detail = server.client.get(f"/api/tickets/{row['id_ticket']}/").json()
    assert detail["respuestas"] == [] and detail["tecnico"] == server.sim.dataset.staff[0]["nombre"]


def test_create_with_json_and_urlencoded(server: SimServer) -> None:
    body: dict[str, Any] = _valid_ticket(server)
    body.update(servicio=int(body["servicio"]), tecnico=int(body["tecnico"]), prioridad=3)
    body.update(asunto="No Tiene Internet", asuntos_default="No Tiene Internet")
    server.sim.variants.ticket_labels = "number"
    response = server.client.post("/api/tickets/", json=body)
    assert response.status_code == 201, response.text
    assert (response.json()["estado"], response.json()["prioridad"]) == (1, 3)
    assert server.client.post("/api/tickets/", data=_valid_ticket(server)).status_code == 201
    active = _tickets(server, {"estado": "1"})["count"]
    assert active == sum(t["estado"] == 1 for t in server.sim.dataset.tickets)
    assert len(server.sim.created_tickets) == 2


def test_priority_comes_from_the_subject(server: SimServer) -> None:
    body = _valid_ticket(server) | {"asunto": "Troncal Dañado", "asuntos_default": "Troncal Dañado"}
    row = server.client.post("/api/tickets/", json=body).json()
    assert row["prioridad"] == "Muy Alta"
    assert "Troncal Dañado" in load_subjects()[4]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"servicio": None}, "servicio"),
        ({"servicio": "999999"}, "servicio"),
        ({"servicio": "abc"}, "servicio"),
        ({"asunto": None}, "asunto"),
        ({"asuntos_default": None}, "asuntos_default"),
        ({"asunto": "Internet Intermitente"}, "asunto"),
        ({"asunto": "Otro", "asuntos_default": "Otro"}, "asuntos_default"),
        ({"asunto": "internet lento", "asuntos_default": "internet lento"}, "asuntos_default"),
        ({"tecnico": "9999"}, "tecnico"),
        ({"tecnico": None}, "tecnico"),
        ({"descripcion": ""}, "descripcion"),
        ({"estado": "9"}, "estado"),
        ({"prioridad": "5"}, "prioridad"),
        ({"prioridad": "alta"}, "prioridad"),
        ({"fecha_inicio": "2026-02-26 10:00"}, "fecha_inicio"),
        ({"fecha_final": "26/02/2026"}, "fecha_final"),
        ({"fecha_final": "25/02/2026 10:00"}, "fecha_final"),
        ({"departamento": None}, "departamento"),
        ({"departamentos_default": "Cocina", "departamento": "Cocina"}, "departamentos_default"),
        ({"departamento": "Facturación"}, "departamento"),
    ],
)
def test_create_validation_errors(
    server: SimServer, change: dict[str, str | None], field: str
) -> None:
    form = _valid_ticket(server)
    for name, value in change.items():
        if value is None:
            form.pop(name)
        else:
            form[name] = value
    response = server.client.post("/api/tickets/", data=form)
    assert response.status_code == 400
    errors = response.json()
    assert list(errors) == [field], errors
    assert all(isinstance(message, str) for message in errors[field])
    assert server.sim.created_tickets == []
    assert _tickets(server)["count"] == 300


def test_create_rejects_non_object_json(server: SimServer) -> None:
    response = server.client.post("/api/tickets/", json=["no"])
    assert response.status_code == 400 and "non_field_errors" in response.json()
