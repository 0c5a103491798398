"""REST's `message` from the catalogue (kit/messages), in the deployment's language (issue
28.19): Spanish by default, English with MESSAGES_LANGUAGE=en; the spec's quoted texts as
quoted in both; figures (the zone cap's counts) formatted into the sentence."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Gateway, Simulator, StartGateway

EXPECTED: dict[str, dict[str, str]] = {
    "es": {
        "phone": "Formato de teléfono no válido",
        "unknown": "No encontrado",
        "zone": "La zona {zone} ya tiene {active} tickets activos (límite 1); no se abre otro "
        "hasta que se resuelva uno",
        "invalid": "Solicitud no válida: body.pings: ",
    },
    "en": {
        "phone": "Invalid phone format",
        "unknown": "Not found",
        "zone": "Zone {zone} already has {active} active tickets (limit 1); no new ticket "
        "until one is resolved",
        "invalid": "Invalid request: body.pings: ",
    },
}


def fill_the_zone(gw: Gateway) -> tuple[dict[str, Any], int]:
    """A customer whose zone is at a cap of 1, and its zone's active count."""
    rows = [r for r in gw.get("/api/v1/clients/").json()["data"] if r["zone_id"] is not None]
    first = rows[0]
    neighbours = [r for r in rows if r["zone_id"] == first["zone_id"]]
    body = {"subject": "Internet Lento", "description": "Lento.", "technician_id": 11}
    for row in neighbours:
        response = gw.post(
            "/api/v1/tickets",
            json={**body, "service_id": row["service_id"], "zone_id": row["zone_id"]},
        )
        if response.status_code == 409 and response.json()["action"] == (
            "zone_ticket_limit_reached"
        ):
            return response.json(), row["zone_id"]
    pytest.fail("the zone never reached its cap")


@pytest.mark.parametrize("language", ["es", "en"])
def test_messages_in_the_deployments_language(
    simulator: Simulator, start_gateway: StartGateway, language: str
) -> None:
    gw = start_gateway(simulator.url, MESSAGES_LANGUAGE=language, MAX_ACTIVE_TICKETS_PER_ZONE=1)
    want = EXPECTED[language]
    assert gw.get("/api/v1/clients/by-phone/12").json()["message"] == want["phone"]
    assert gw.get("/api/v1/nowhere").json()["message"] == want["unknown"]
    # Quoted by the spec: as quoted, whatever the language.
    assert gw.get("/api/v1/clients/by-document/ZZZ999").json()["message"] == "Client not found"
    assert gw.get("/api/v1/clients/by-document/a.b").json()["message"] == (
        "Invalid document format"
    )
    assert gw.get("/api/v1/clients/search").json()["message"] == "Query parameter 'q' is required"
    verify = gw.post("/api/v1/clients/999999/verify", json={"name": "x", "address": "y"})
    assert verify.json()["message"] == (
        "Debe proporcionar al menos 3 de los 4 campos para verificar la identidad"
    )
    # A field's detail (meta.errors) is the validator's; the sentence around it translated.
    invalid = gw.post("/api/v1/101/ping/", json={"pings": 99}).json()
    assert invalid["message"].startswith(want["invalid"])
    # The zone cap's figures, formatted into the catalogue's sentence.
    refused, zone = fill_the_zone(gw)
    active = refused["data"]["active_tickets"]
    assert refused["message"] == want["zone"].format(zone=zone, active=active)
