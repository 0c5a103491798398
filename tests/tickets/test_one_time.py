"""One ticket shows one time (CALLERS.md, "Answers a bot can say"): the 201, the ticket's
read, the client's list and the duplicate guard's 409 agree, as local times in TIMEZONE."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from tests.conftest import Gateway, Simulator, StartSimulator
from tests.tickets.conftest import ticket_body


def times(ticket: dict[str, Any]) -> tuple[str, str]:
    return ticket["created_at"], ticket["end_date"]


def test_one_ticket_shows_the_same_local_times_in_every_answer(
    gw_now: Gateway, sim: Simulator
) -> None:
    body = ticket_body(zone_id=3, service_id=301)
    created = gw_now.post("/api/v1/tickets", json=body)
    assert created.status_code == 201, created.text
    ticket = created.json()["data"]
    ticket_id = ticket["ticket_id"]
    # A local time in the account's zone, not the machine's or UTC.
    local_now = datetime.now(ZoneInfo(gw_now.settings.TIMEZONE)).replace(tzinfo=None)
    shown = datetime.strptime(ticket["created_at"], "%Y-%m-%d %H:%M")
    assert abs((local_now - shown).total_seconds()) < 120, (ticket["created_at"], local_now)
    # The upstream's own row says the same.
    row = sim.state.get_ticket(ticket_id)
    assert row is not None and row["fecha_creacion"] == ticket["created_at"]

    detail = gw_now.get(f"/api/v1/tickets/{ticket_id}")
    assert detail.status_code == 200, detail.text
    # A zone check re-reads the list (1 ms sweep age): later reads show the upstream's row,
    # not the copy this gateway patched in.
    assert gw_now.get("/api/v1/tickets/zone-blocked/3").status_code == 200
    listed = gw_now.get("/api/v1/clients/301/tickets")
    assert listed.status_code == 200, listed.text
    (in_list,) = [t for t in listed.json()["data"] if t["ticket_id"] == ticket_id]
    again = gw_now.post("/api/v1/tickets", json=dict(body, description="otra vez"))
    assert again.status_code == 409
    assert again.json()["action"] == "ticket_already_open"
    assert again.json()["data"]["ticket_id"] == ticket_id

    answers = [ticket, detail.json()["data"], in_list, again.json()["data"]]
    assert {times(a) for a in answers} == {times(ticket)}, [times(a) for a in answers]


def test_the_simulator_writes_ticket_times_in_its_account_zone(
    start_simulator: StartSimulator, data_file: Path
) -> None:
    tokyo = start_simulator(data_file=data_file, timezone="Asia/Tokyo")
    ticket, errors = tokyo.state.create_ticket(
        {
            "servicio": "301",
            "asunto": "Internet Lento",
            "asuntos_default": "Internet Lento",
            "tecnico": "11",
            "descripcion": "lento",
            "estado": "1",
            "prioridad": "2",
            "fecha_inicio": "01/03/2026 10:00",
            "fecha_final": "04/03/2026 10:00",
            "departamento": "Soporte Técnico",
            "departamentos_default": "Soporte Técnico",
        }
    )
    assert ticket is not None, errors
    shown = datetime.strptime(ticket["fecha_creacion"], "%Y-%m-%d %H:%M")
    local_now = datetime.now(ZoneInfo("Asia/Tokyo")).replace(tzinfo=None)
    assert abs((local_now - shown).total_seconds()) < 120
