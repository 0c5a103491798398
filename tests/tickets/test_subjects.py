"""The subject catalogue: shipped as data, replaceable by a file, enforced before any call."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from isp_gateway.settings import ConfigurationError
from isp_gateway.tickets.subjects import SubjectCatalogue
from tests.conftest import Gateway, Simulator, StartGateway
from tests.tickets.conftest import post_calls, settle, ticket_body, ticket_calls


def test_subjects_grouped_and_flat(gw: Gateway) -> None:
    response = gw.get("/api/v1/tickets/subjects")
    assert response.status_code == 200
    body = response.json()
    assert (body["ok"], body["type"], body["action"]) == (True, "success", "ticket_subjects_listed")
    groups = body["data"]["by_priority"]
    assert list(groups) == ["low", "normal", "high", "very_high"]
    assert groups["very_high"] == ["Troncal Dañado", "Caja Nap Dañada", "Cambio A Fibra Óptica"]
    assert "No Tiene Internet" in groups["high"]
    assert "Internet Lento" in groups["normal"]
    flat = body["data"]["all"]
    assert len(flat) == sum(len(names) for names in groups.values()) == 31
    assert flat[0] == "Cambio de Contraseña en Router Wifi"


def test_subjects_need_a_token(gw: Gateway) -> None:
    response = gw.client.get("/api/v1/tickets/subjects")
    assert response.status_code == 401
    assert response.json() == {"detail": "Could not validate credentials."}


def test_unknown_subject_is_refused_before_any_upstream_call(gw: Gateway, sim: Simulator) -> None:
    settle(gw, sim)
    response = gw.post("/api/v1/tickets", json=ticket_body(subject="Se cayó el poste"))
    assert response.status_code == 400
    body = response.json()
    assert (body["ok"], body["action"], body["data"]) == (False, "ticket_creation_failed", None)
    # Spanish by default (MESSAGES_LANGUAGE, kit/messages).
    assert "Se cayó el poste" in body["message"] and "catálogo" in body["message"]
    assert ticket_calls(sim) == 0


def test_a_near_miss_is_refused_with_the_catalogue_spelling(gw: Gateway, sim: Simulator) -> None:
    response = gw.post("/api/v1/tickets", json=ticket_body(subject="no tiene internet"))
    assert response.status_code == 400
    assert "'No Tiene Internet'" in response.json()["message"]
    assert post_calls(sim) == 0


def test_operator_file_replaces_the_catalogue(
    tmp_path: Path, sim: Simulator, start_gateway: StartGateway
) -> None:
    path = tmp_path / "subjects.json"
    path.write_text(json.dumps({"2": ["Internet Lento"], "4": ["Troncal Dañado"]}), "utf-8")
    gw = start_gateway(sim.url, TICKET_SUBJECTS_FILE=str(path))
    data = gw.get("/api/v1/tickets/subjects").json()["data"]
    assert data == {
        "by_priority": {
            "low": [],
            "normal": ["Internet Lento"],
            "high": [],
            "very_high": ["Troncal Dañado"],
        },
        "all": ["Internet Lento", "Troncal Dañado"],
    }
    # A packaged subject the operator dropped is now refused.
    response = gw.post("/api/v1/tickets", json=ticket_body(subject="No Tiene Internet"))
    assert response.status_code == 400
    # The priority comes from the operator's file.
    created = gw.post(
        "/api/v1/tickets", json=ticket_body(subject="Troncal Dañado", zone_id=3, service_id=301)
    )
    assert created.status_code == 201, created.text
    assert created.json()["data"]["priority"] == "4"


@pytest.mark.parametrize(
    "content",
    ["not json", "[]", '{"5": ["X"]}', '{"1": ["A", ""]}', '{"1": ["A"], "2": ["A"]}'],
)
def test_a_malformed_file_stops_start_up(tmp_path: Path, content: str) -> None:
    path = tmp_path / "subjects.json"
    path.write_text(content, "utf-8")
    with pytest.raises(ConfigurationError, match="TICKET_SUBJECTS_FILE"):
        SubjectCatalogue.load(path)


def test_priority_of_each_level() -> None:
    catalogue = SubjectCatalogue.load()
    assert catalogue.priority_of("Cambio de Domicilio") == 1
    assert catalogue.priority_of("Internet Intermitente") == 2
    assert catalogue.priority_of("Jumper Dañado") == 3
    assert catalogue.priority_of("Caja Nap Dañada") == 4
    assert catalogue.priority_of("Caja Nap Danada") is None


def test_a_subject_in_another_unicode_form_is_the_catalogue_subject(
    gw: Gateway, sim: Simulator
) -> None:
    # "Antena Dañada" with a decomposed ñ (n + combining tilde), as some keyboards send it.
    decomposed = unicodedata.normalize("NFD", "Antena Dañada")
    assert decomposed != "Antena Dañada"
    response = gw.post(
        "/api/v1/tickets", json=ticket_body(subject=decomposed, zone_id=3, service_id=301)
    )
    assert response.status_code == 201, response.text
    assert response.json()["data"]["subject"] == "Antena Dañada"
    # The upstream got the catalogue's spelling.
    assert sim.state.created_tickets[0]["asunto"] == "Antena Dañada"
    assert SubjectCatalogue.load().canonical(decomposed) == "Antena Dañada"
    assert SubjectCatalogue.load().canonical("antena dañada") is None
