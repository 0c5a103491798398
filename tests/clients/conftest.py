"""Fixtures for the client tests: a crafted upstream dataset and a warmed gateway."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from isp_gateway.clients.fastpath import LookupDoor
from isp_gateway.clients.index import ClientIndex
from isp_gateway.upstream.clients import Client
from isp_gateway.web.edge import Edge
from tests.conftest import Gateway, Pair, Simulator, StartPair, pair_starter
from tests.support import wait_for_age, wait_until


def lookup_edge(regular: Any, gw: Gateway) -> Edge:
    """An edge with only the lookup door, in front of `regular` (the gateway's app has
    served a request: its route table is filled)."""
    return Edge(
        regular,
        routes=gw.app.state.route_table,
        first=[LookupDoor(lambda: gw.runtime)],
        max_body_bytes=gw.settings.MAX_BODY_BYTES,
    )


def body(response: Any) -> dict[str, Any]:
    data: dict[str, Any] = response.json()
    return data


def envelope(response: Any, status: int) -> dict[str, Any]:
    """The JSON envelope of `response`, which must answer `status`."""
    assert response.status_code == status, response.text
    return body(response)


def assert_fields(out: dict[str, Any], **expected: Any) -> None:
    """Assert that the envelope `out` has these top-level fields (the others not compared)."""
    assert {name: out[name] for name in expected} == expected, out


def row(service_id: int, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id_servicio": service_id,
        "usuario": f"user{service_id}@isp",
        "nombre": f"CLIENTE {service_id}",
        "cedula": str(1000000 + service_id),
        "telefono": f"31000{service_id:05d}",
        "direccion": "CALLE 1 # 2-3",
        "ciudad": "Bogotá",
        "localidad": "Suba",
        "estado": "Activo",
        "estado_facturas": "Pagadas",
        "zona": {"id": 3, "nombre": "Norte"},
        "ip": "172.16.0.2",
        "mac_cpe": "AA:BB:CC:DD:EE:FF",
        "usuario_cpe": "admin",
        "password_cpe": "cpe-secret-pw",
        "password_servicio": "svc-secret-pw",
        "router": {
            "id": 1,
            "nombre": "MK-1",
            "usuario_router": "admin",
            "password_router": "rt-pw",
        },
        "interfaz_lan": "ether1",
        "plan_internet": {"id": 2, "nombre": "PLAN 10MB"},
        "precio_plan": "40000.00",
        "fecha_corte": "5/03/2026",
        "saldo": "60.00",
        "tecnico": {"id": 11, "nombre": "Carlos"},
    }
    base.update(fields)
    return base


PLANS = [
    {"id": 1, "nombre": "PLAN 5MB", "tipo": "PPPOE", "precio": "30000.00"},
    {"id": 2, "nombre": "PLAN 10MB", "tipo": "PPPOE", "precio": "40000.00"},
    {"id": 3, "nombre": "Plan Rural 6 Megas", "tipo": "SIMPLE QUEUE", "precio": "35000.00"},
    {"id": 4, "nombre": "PCQ 4MB", "tipo": "PCQ", "precio": "25000.00"},
]

CLIENTS = [
    row(101, nombre="JUAN CARLOS PÉREZ GÓMEZ", cedula="12345678",
        telefono="3001234567,3109876543", direccion="VDA/ EL ROSAL CASA 4",
        ciudad="Zipaquirá", localidad="San Jorge"),
    row(102, nombre="María José Rodríguez", cedula="87654321", telefono="+57 3157654321",
        direccion="B/ LOS PINOS MZ 3", estado="Suspendido", fecha_corte="2026-04-07",
        saldo="-1500.50", zona=None, tecnico=None),
    row(103, nombre="ANA LUCÍA TORRES", cedula="AB12345", telefono="",
        direccion="BARRIO SANTA ROSA", precio_plan="",
        plan_internet={"id": 3, "nombre": "Plan Rural 6 Megas"}),
    row(104, nombre="ANA LUCIA TORRES", cedula="555666777", telefono="3201112233 3502223344",
        direccion="VEREDA LA ESPERANZA", precio_plan="0.00", estado="Cancelado"),
    # Twins: same name, address and plan (a mother and daughter on one farm).
    row(105, nombre="ROSA DÍAZ", cedula="11122233", direccion="V/ EL PORVENIR"),
    row(106, nombre="ROSA DIAZ", cedula="11122244", direccion="VDA EL PORVENIR"),
    row(107, nombre="JOSÉ PEREZ", cedula="99887766", telefono="3004445566; 3004445567",
        direccion="CALLE 5 # 12-34", fecha_corte="31/02/2026", saldo="abc"),
]  # fmt: skip


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "clients.json"
    path.write_text(json.dumps({"clients": CLIENTS, "plans": PLANS}, ensure_ascii=False), "utf-8")
    return path


def warm(gw: Gateway, loads: int = 1, timeout: float = 10) -> None:
    """Wait for the start-up load of the client cache, to its end: `loads` counts a load
    once fetched, before it is built and published, and a refresh started meanwhile would
    join it instead of loading (on a busy machine that window is long)."""
    cache = gw.runtime.services.clients.cache

    def loaded() -> bool:
        inflight = cache._inflight
        return cache.loads >= loads and (inflight is None or inflight.done())

    wait_until(loaded, timeout=timeout, interval=0.01, message="the client cache to load")


def quiet(gw: Gateway, sim: Simulator, timeout: float = 15) -> None:
    """The gateway's start-up loads done (the client list, then the pending invoices, which a
    starved machine may start late), then the simulator's counts reset: what a test counts
    next is its own doing."""
    warm(gw)
    wait_until(
        lambda: gw.runtime.services.accounts.invoices.loads >= 1,
        timeout=timeout,
        interval=0.01,
        message="the invoice cache to load",
    )
    sim.state.reset_stats()


def adopted(gw: Gateway, timeout: float = 10) -> None:
    """Wait until a worker holds a client list (its own load or the shared copy it took up)
    and has no load of its own in flight."""
    cache = gw.runtime.services.clients.cache

    def holds() -> bool:
        inflight = cache._inflight
        return cache.local is not None and (inflight is None or inflight.done())

    wait_until(holds, timeout=timeout, interval=0.01, message="the worker to hold the list")


def wait_for_list_age(gw: Gateway, seconds: float) -> None:
    """Until the client list this worker holds is `seconds` old (from its load): its rows are
    no longer fresh (STATE_FRESH_SECONDS)."""
    wait_for_age(gw.runtime.services.clients.cache, seconds)


def calls(sim: Simulator, key: str = "GET /api/clientes/") -> int:
    return int(sim.state.calls[key])


start_pair = pair_starter(
    "data_file",
    warm,
    "A simulator on the crafted data and a gateway whose cache has loaded (stats reset).",
)


@pytest.fixture
def pair(start_pair: StartPair) -> Pair:
    return start_pair()


def by_doc(index: ClientIndex, document: str) -> Client | None:
    """The client a lookup by `document` finds in `index` (as the service's lookup does)."""
    found = index.found_with_others("document", document)
    return None if found is None else found[0]


def by_phone_number(index: ClientIndex, number: str) -> Client | None:
    """The client a lookup by a normalised phone number finds in `index`."""
    found = index.found_with_others("phone", number)
    return None if found is None else found[0]
