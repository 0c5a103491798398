"""Fixtures for diagnose and a client's tickets: a small designed upstream with routers,
service states, pending invoices and tickets, and a helper that waits for warm caches."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Gateway, Simulator, StartGateway, StartSimulator
from tests.outages.conftest import ROUTERS, TECH
from tests.support import client_row, data_file_of, wait_for_age, wait_until

# service id → (estado, zone id, router id). Router ids differ from zone ids on purpose.
CLIENTS = {
    101: ("Activo", 1, 7),
    102: ("Suspendido", 1, 7),
    103: ("Cancelado", 2, 8),
    104: ("Activo", 2, 8),
    105: ("Activo", 1, 7),
    # Suspended with nothing owed: no pending invoice, a zero balance.
    106: ("Suspendido", 1, 7),
}
PAID_UP = {106}


def _client(service_id: int, estado: str, zone_id: int, router_id: int) -> dict[str, Any]:
    router = next(r for r in ROUTERS if r["id"] == router_id)
    owes = estado == "Suspendido" and service_id not in PAID_UP
    return client_row(
        service_id,
        estado,
        zone_id,
        router,
        TECH,
        estado_facturas="Vencidas" if owes else "Pagadas",
        saldo="60000.00" if owes else "0.00",
        ip=f"172.16.0.{service_id - 100}",
    )


def _ticket(ticket_id: int, service_id: int, estado: int, subject: str, created: str) -> Any:
    return {
        "id_ticket": ticket_id,
        "asunto": subject,
        "descripcion": "ticket de prueba",
        "estado": estado,
        "prioridad": 2,
        "fecha_creacion": created,
        "fecha_estimada_inicio": created,
        "fecha_estimada_fin": "2026-02-09 10:00",
        "tecnico": TECH["nombre"],
        "email_tecnico": "carlos.ruiz@isp.example",
        "departamento": "Soporte Técnico",
        "servicio": service_id,
        "respuestas": [],
    }


def build_dataset() -> dict[str, Any]:
    clients = [_client(sid, *spec) for sid, spec in CLIENTS.items()]
    tickets = [
        # Service 101: two active tickets (newest first: 7003, then 7001 and 7002 tied on
        # time, the higher id first), one resolved that must not be listed.
        _ticket(7001, 101, 1, "Internet Lento", "2026-02-02 09:15"),
        _ticket(7002, 101, 1, "Antena Desalineada", "2026-02-02 09:15"),
        _ticket(7003, 101, 1, "Internet Intermitente", "2026-02-03 08:00"),
        _ticket(7004, 101, 3, "No Tiene Internet", "2026-02-04 08:00"),
        # Zone 2 at the cap of 4 (`gw` sets it; zone 1 holds 3, one slot free).
        _ticket(7008, 104, 1, "Cambio de Antena", "2026-02-01 09:00"),
        _ticket(7005, 104, 1, "Internet Lento", "2026-02-01 10:00"),
        _ticket(7006, 104, 1, "Antena Dañada", "2026-02-01 11:00"),
        _ticket(7007, 103, 1, "Cancelación", "2026-02-01 12:00"),
    ]
    invoices = [
        {
            "id_factura": 9001,
            "cliente": {"usuario": "cliente102@isp", "nombre": "CLIENTE 102"},
            "total": "40000.00",
            "fecha_emision": "2026-01-01",
            "fecha_vencimiento": "2026-01-16",
            "estado": 1,
        },
        {
            "id_factura": 9002,
            "cliente": {"usuario": "cliente102@isp", "nombre": "CLIENTE 102"},
            "total": "20000.50",
            "fecha_emision": "2026-02-01",
            "fecha_vencimiento": "2026-02-16",
            "estado": 1,
        },
    ]
    return {
        "clients": clients,
        "tickets": tickets,
        "invoices": invoices,
        "routers": ROUTERS,
        "staff": [TECH],
    }


GATEWAY_SETTINGS: dict[str, Any] = {
    "PING_POLL_INTERVAL_SECONDS": 0.2,
    "MAX_ACTIVE_TICKETS_PER_ZONE": 4,
}


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    return data_file_of(tmp_path / "upstream-diagnose.json", build_dataset())


@pytest.fixture
def sim(start_simulator: StartSimulator, data_file: Path) -> Simulator:
    return start_simulator(data_file=data_file, ping_duration=0.2)


@pytest.fixture
def gw(sim: Simulator, start_gateway: StartGateway) -> Gateway:
    return start_gateway(sim.url, **GATEWAY_SETTINGS)


def warm(gw: Gateway, sim: Simulator) -> None:
    """Wait until every cache diagnose reads has loaded (the background warm-ups), then zero
    the simulator's call counts."""
    runtime = gw.runtime
    resources = [
        runtime.services.clients.cache,
        runtime.services.tickets.active,
        runtime.services.outages.catalogue,
        runtime.services.accounts.invoices,
    ]
    wait_until(
        lambda: all(resource.local is not None for resource in resources),
        timeout=30,
        message="every cache to load",
    )
    sim.state.reset_stats()


@pytest.fixture
def gw_outage_checks_fail(sim: Simulator, start_gateway: StartGateway) -> Gateway:
    """A warm gateway whose outage checks now fail: the routers' endpoint answers errors and
    the checks cached at the warm-up have expired (OUTAGE_CACHE_SECONDS=1)."""
    gw = start_gateway(sim.url, OUTAGE_CACHE_SECONDS=1, UPSTREAM_TIMEOUT_SECONDS=1.0)
    warm(gw, sim)
    sim.state.faults.update({"error_rate": 1.0, "path_prefix": "/api/router/"})
    wait_for_age(gw.runtime.services.outages.catalogue, 1)  # its refreshes fail meanwhile
    return gw


def upstream_calls(sim: Simulator) -> dict[str, int]:
    return {name: n for name, n in sim.state.calls.items() if n}


PING_CALLS = {"POST /api/clientes/{id}/ping/", "GET /api/tasks/{id}/"}
