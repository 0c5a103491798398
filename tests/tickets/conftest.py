"""Fixtures for the ticket tests: a small, designed upstream dataset and request helpers."""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.conftest import Gateway, Simulator, StartGateway, StartSimulator
from tests.support import data_file_of, wait_until

TECH = {"id": 11, "nombre": "Carlos Ruiz"}
# Zone 1: 2 active (one free slot at the default cap of 3); zone 2: 3 active (blocked);
# zone 3: none active; zone 4: 3 active. Closed/resolved/in-progress tickets everywhere.
ZONE_SERVICES = {1: [101, 102, 103], 2: [201, 202], 3: [301, 302], 4: [401]}
ACTIVE = {1: 2, 2: 3, 3: 0, 4: 3}


def _client(service_id: int, zone_id: int) -> dict[str, Any]:
    return {
        "id_servicio": service_id,
        "nombre": f"CLIENTE {service_id}",
        "cedula": str(10_000_000 + service_id),
        "telefono": "3001234567",
        "direccion": "B/ CENTRO",
        "estado": "Activo",
        "zona": {"id": zone_id, "nombre": f"Zona {zone_id}"},
        "tecnico": TECH,
    }


def build_dataset() -> dict[str, Any]:
    clients = [_client(s, z) for z, services in ZONE_SERVICES.items() for s in services]
    tickets: list[dict[str, Any]] = []
    next_id = 5001

    def add(service_id: int, estado: int, **extra: Any) -> None:
        nonlocal next_id
        tickets.append(
            {
                "id_ticket": next_id,
                "asunto": "Internet Lento",
                "descripcion": f"ticket {next_id}",
                "estado": estado,
                "prioridad": 2,
                "fecha_creacion": "2026-02-02 09:15",
                "fecha_estimada_inicio": "2026-02-02 10:00",
                "fecha_estimada_fin": "2026-02-05 10:00",
                "tecnico": TECH["nombre"],
                "departamento": "Soporte Técnico",
                "servicio": service_id,
                "respuestas": [],
                **extra,
            }
        )
        next_id += 1

    for zone_id, services in ZONE_SERVICES.items():
        for n in range(ACTIVE[zone_id]):
            add(services[n % len(services)], 1)
        # Not active: in progress, resolved, closed; they must never count.
        for estado in (2, 3, 4):
            add(services[0], estado)
    # A ticket with a history of answers (newest last) for the lookup tests.
    add(
        302,
        3,
        asunto="No Tiene Internet",
        prioridad=3,
        descripcion="<p>Sin servicio</p>",
        respuestas=[
            {"respuesta": "Visita programada", "fecha": "2026-02-02 11:00"},
            {"respuesta": "Antena cambiada, servicio restablecido", "fecha": "2026-02-03 16:30"},
        ],
    )
    return {"clients": clients, "tickets": tickets, "staff": [TECH, {"id": 12, "nombre": "Ana"}]}


ANSWERED_TICKET = 5001 + sum(ACTIVE.values()) + 3 * len(ZONE_SERVICES)


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    return data_file_of(tmp_path / "upstream.json", build_dataset())


@pytest.fixture
def gw(sim: Simulator, start_gateway: StartGateway) -> Gateway:
    # A small page size: every zone count reads several pages.
    return start_gateway(sim.url, UPSTREAM_PAGE_SIZE=2)


@pytest.fixture
def gw_now(sim: Simulator, start_gateway: StartGateway) -> Gateway:
    """A gateway whose zone counts re-read the upstream at once (a shared sweep of active
    tickets at most a millisecond old instead of ZONE_SWEEP_FRESH_SECONDS): for tests about
    a count that follows the upstream's own changes, not about the sweep's age."""
    return start_gateway(sim.url, UPSTREAM_PAGE_SIZE=2, ZONE_SWEEP_FRESH_SECONDS=0.001)


def ticket_body(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "service_id": 101,
        "subject": "No Tiene Internet",
        "description": "El cliente no tiene servicio desde ayer",
        "technician_id": 11,
        "zone_id": 1,
    }
    body.update(overrides)
    return body


def post_calls(sim: Simulator) -> int:
    return int(sim.state.calls["POST /api/tickets/"])


class InFrontOfSimulator:
    """An ASGI layer in front of the simulator's app that acts on ticket POSTs."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    @property
    def state(self) -> Any:
        return self.app.state.sim  # type: ignore[attr-defined]

    @staticmethod
    def ticket_post(scope: Scope) -> bool:
        return (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"] == "/api/tickets/"
        )


class LossyUpstream(InFrontOfSimulator):
    """Sits in front of the simulator and loses the answer of the next ticket POSTs after the
    simulator handled them (the ticket exists, the gateway sees a 500 or a hang): the case a
    timed-out creation leaves behind."""

    def __init__(self, app: ASGIApp) -> None:
        super().__init__(app)
        self.lose = 0
        self.hang = 0.0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        lossy = self.ticket_post(scope) and self.lose > 0
        if not lossy:
            await self.app(scope, receive, send)
            return
        self.lose -= 1

        async def discard(message: Any) -> None:
            return None

        await self.app(scope, receive, discard)
        if self.hang:
            await asyncio.sleep(self.hang)
        await send({"type": "http.response.start", "status": 500, "headers": []})
        await send({"type": "http.response.body", "body": b"<h1>Server Error (500)</h1>"})


class AfterTicketPost(InFrontOfSimulator):
    """Sits in front of the simulator and runs `hook` (blocking, off the event loop) after the
    simulator has handled the `nth` ticket POST and before its answer goes back: the moment
    a failure (the store frozen, a Redis master killed) leaves a ticket made upstream that
    the service has not recorded yet. `arrivals`: when each ticket POST came in
    (time.monotonic)."""

    def __init__(self, app: ASGIApp, hook: Callable[[], None], nth: int = 1) -> None:
        super().__init__(app)
        self.hook = hook
        self.nth = nth
        self.arrivals: list[float] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        posting = self.ticket_post(scope)
        if posting:
            self.arrivals.append(time.monotonic())
        if not posting or len(self.arrivals) != self.nth:
            await self.app(scope, receive, send)
            return
        answer: list[Any] = []

        async def keep(message: Any) -> None:
            answer.append(message)

        await self.app(scope, receive, keep)
        await asyncio.to_thread(self.hook)
        for message in answer:
            await send(message)


def ticket_calls(sim: Simulator) -> int:
    """Upstream calls on ticket paths (other features warm their caches in the background)."""
    return sum(n for name, n in sim.state.calls.items() if "/api/tickets/" in name)


def settle(gw: Gateway, sim: Simulator) -> None:
    """Wait for the gateway's start-up loads (the first sweep of active tickets and the client
    list, background warm-ups a creation would otherwise join), then zero the simulator's
    call counts: what a test counts next is its own request's."""
    wait_for_sweep(gw)
    wait_until(
        lambda: gw.runtime.services.clients.cache.local is not None,
        timeout=30,
        message="the client list to load",
    )
    sim.state.reset_stats()


def wait_for_sweep(worker: Gateway) -> None:
    """Until the worker's first sweep of active tickets (a background warm-up) has loaded."""
    wait_until(
        lambda: worker.runtime.services.tickets.active.local is not None,
        timeout=30,
        message="the active-ticket sweep to load",
    )


# -- two workers sharing a real Redis (database 12) ------------------------------------------

RUN_REDIS_DB = 12


class Run:
    """This run's zones and ticket ids, far from any other run's: several suites may share
    this Redis at the same time, and zone locks, recent-ticket lists and technician records
    are keyed by those numbers. Its keys are deleted at the end (no FLUSHDB)."""

    def __init__(self, redis_url: str) -> None:
        self.redis_url = redis_url
        self.zone_base = random.randrange(1_000, 1_000_000) * 1_000
        self.id_base = random.randrange(1_000, 1_000_000) * 10_000
        self.key_digests: list[str] = []

    def idempotency_key(self) -> str:
        key = f"shared-key-{uuid.uuid4().hex}"
        self.key_digests.append(hashlib.sha256(key.encode()).hexdigest())
        return key

    def zone(self, zone_id: int) -> int:
        return self.zone_base + zone_id

    def dataset(self) -> dict[str, Any]:
        data = build_dataset()
        for client in data["clients"]:
            client["zona"]["id"] = self.zone(client["zona"]["id"])
        for ticket in data["tickets"]:
            ticket["id_ticket"] += self.id_base
        return data


@pytest.fixture
def run(redis_url: Callable[[int], str]) -> Iterator[Run]:
    # No skip: a missing Redis must fail these tests, since the guarantee depends on it.
    url = redis_url(RUN_REDIS_DB)
    client = redis.Redis.from_url(url)
    client.ping()
    this = Run(url)
    try:
        yield this
    finally:
        patterns = [f"ispgw:*zone:{this.zone(z)}*" for z in ZONE_SERVICES]
        patterns.append(f"ispgw:*technician:{this.id_base // 10_000}????")
        patterns += [f"ispgw:*idempotency:tickets:{d}" for d in this.key_digests]
        # The shared sweep of active tickets (one key set per store, loaded from this run's
        # simulator): a later run must not start from this run's tickets.
        patterns.append("ispgw:*cache:tickets:active*")
        # And the shared client list: the zone capped is the client record's, so a later run
        # must read its own clients' zones.
        patterns.append("ispgw:*cache:clients*")
        for pattern in patterns:
            for key in client.scan_iter(match=pattern):
                client.delete(key)
        client.close()


@pytest.fixture
def run_sim(run: Run, tmp_path: Path, start_simulator: StartSimulator) -> Simulator:
    return start_simulator(data_file=data_file_of(tmp_path / "upstream-run.json", run.dataset()))


@pytest.fixture
def run_workers(run: Run, run_sim: Simulator, start_gateway: StartGateway) -> list[Gateway]:
    """Two gateway workers on the run's simulator, sharing the run's Redis."""
    return [start_gateway(run_sim.url, REDIS_URL=run.redis_url) for _ in range(2)]


def refusal(response: httpx.Response, status: int) -> tuple[str, str]:
    """The action and the reason (meta) of a refused creation, which must answer `status`."""
    assert response.status_code == status, response.text
    body = response.json()
    return body["action"], body["meta"]["reason"]


def hang_ticket_posts(sim: Simulator, seconds: float) -> None:
    """Every POST of a ticket hangs upstream for `seconds`."""
    faults = sim.state.faults
    faults.hang_rate, faults.hang_seconds = 1.0, seconds
    faults.method, faults.path_prefix = "POST", "/api/tickets/"
