"""Fixtures for outage notices: a small designed upstream with two routers, receivers on
loopback that record what they get, and a subscriptions file of the test's own."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks import Webhook
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from isp_gateway.notices import subscriptions as subs
from tests.conftest import Gateway, Simulator
from tests.support import client_row, data_file_of, run_server

TECH = {"id": 11, "nombre": "Carlos Ruiz"}
ROUTERS = [{"id": 7, "nombre": "MK-NORTE"}, {"id": 8, "nombre": "MK-SUR"}]
# service id → (estado, zone id, router id). Router ids are not zone ids.
CLIENTS = {
    101: ("Activo", 1, 7),
    102: ("Suspendido", 3, 7),
    103: ("Activo", 2, 8),
    104: ("Activo", 2, 8),
    105: ("Activo", 1, 7),
}
ON_7 = [101, 102, 105]
ZONES_7 = [1, 3]


def _client(service_id: int, estado: str, zone_id: int, router_id: int) -> dict[str, Any]:
    router = next(r for r in ROUTERS if r["id"] == router_id)
    plan = {"id": 1, "nombre": "PLAN 10MB"}
    return client_row(
        service_id, estado, zone_id, router, TECH, plan_internet=plan, precio_plan="40000.00"
    )


def build_dataset() -> dict[str, Any]:
    return {
        "clients": [_client(sid, *spec) for sid, spec in CLIENTS.items()],
        "routers": ROUTERS,
        "staff": [TECH],
        "plans": [
            {"id": 1, "nombre": "PLAN 10MB", "tipo": "PPPOE", "precio": "40000.00",
             "bajada": "10M", "subida": "2M"}
        ],
    }  # fmt: skip


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    return data_file_of(tmp_path / "upstream-outages.json", build_dataset())


# -- receivers -------------------------------------------------------------------------------


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def event(self) -> dict[str, Any]:
        parsed: dict[str, Any] = json.loads(self.body)
        return parsed


@dataclass
class Receiver:
    """A webhook receiver on loopback: records every request (before answering), then
    answers the next of `answers` (204 once they run out), or hangs while `hang` is set."""

    url: str = ""
    received: list[Received] = field(default_factory=list)
    answers: list[int] = field(default_factory=list)
    hang: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def endpoint(self, request: Request) -> Response:
        body = await request.body()
        with self.lock:
            self.received.append(Received(dict(request.headers), body, time.monotonic()))
            status = self.answers.pop(0) if self.answers else 204
        while self.hang:
            await asyncio.sleep(0.05)
        return Response(status_code=status)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{path:path}", self.endpoint, methods=["POST"])])

    def of(self, event_type: str) -> list[Received]:
        with self.lock:
            return [r for r in self.received if r.event["type"] == event_type]

    def wait(self, event_type: str, count: int = 1, timeout: float = 15.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.of(event_type)) < count:
            assert time.monotonic() < deadline, (
                f"{count} {event_type} not received within {timeout} s: {self.received}"
            )
            time.sleep(0.02)
        return self.of(event_type)


StartReceiver = Callable[[], Receiver]


@pytest.fixture
def start_receiver() -> Iterator[StartReceiver]:
    with contextlib.ExitStack() as stack:
        made: list[Receiver] = []

        def start() -> Receiver:
            receiver = Receiver()
            receiver.url = stack.enter_context(run_server(receiver.app())) + "/hook"
            made.append(receiver)
            return receiver

        yield start
        for receiver in made:
            receiver.hang = False  # released, so the servers stop at once


# -- subscriptions ---------------------------------------------------------------------------


@dataclass
class Hooks:
    """A WEBHOOKS_FILE of the test's own, changed as the CLI changes it."""

    path: Path

    def add(self, name: str, url: str, events: list[str] | None = None) -> str:
        entry = subs.new_entry(name, url, events or list(subs.EVENT_TYPES))
        subs.add(self.path, entry)
        return str(entry["secret"])

    def remove(self, name: str) -> None:
        assert subs.remove(self.path, name)


@pytest.fixture
def hooks(tmp_path: Path) -> Hooks:
    return Hooks(tmp_path / "webhooks.json")


Bot = tuple[Receiver, str]


@pytest.fixture
def bot(start_receiver: StartReceiver, hooks: Hooks) -> Bot:
    """A receiver subscribed as "bot" to every event type, and its signing secret."""
    receiver = start_receiver()
    return receiver, hooks.add("bot", receiver.url)


def notice_settings(hooks: Hooks, **more: Any) -> dict[str, Any]:
    """A gateway that sees flips within about a second and retries at once."""
    return {
        "OUTAGE_CACHE_SECONDS": 1,
        "WEBHOOKS_FILE": str(hooks.path),
        "WEBHOOKS_ALLOW_HTTP": True,
        "WEBHOOKS_RETRY_SECONDS": "0.3",
        **more,
    }


def watching(gw: Gateway, timeout: float = 30.0) -> Gateway:
    """Wait until the gateway has the client list and has compared the router catalogue."""
    services = gw.runtime.services
    deadline = time.monotonic() + timeout
    while services.clients.cache.local is None or services.outages.detector.compared_at == 0:
        assert time.monotonic() < deadline, "the gateway never compared the router catalogue"
        time.sleep(0.02)
    return gw


def verified(received: Received, secret: str) -> dict[str, Any]:
    """The event, once the standardwebhooks verifier accepts its signature."""
    event: dict[str, Any] = Webhook(secret).verify(received.body, received.headers)
    return event


def raise_outage(sim: Simulator, router_id: int, description: str = "") -> None:
    sim.state.set_outage(router_id, True, description)


def clear_outage(sim: Simulator, router_id: int) -> None:
    sim.state.set_outage(router_id, False)


def flip_twice(sim: Simulator, router_id: int, receiver: Receiver) -> None:
    """Raise and clear the flag of `router_id` twice, each flip's notice received before
    the next flip."""
    for flip in range(1, 3):
        raise_outage(sim, router_id, f"Corte {flip}")
        receiver.wait("outage.started", flip)
        clear_outage(sim, router_id)
        receiver.wait("outage.ended", flip)


def seen(gw: Gateway, timeout: float = 10.0) -> list[dict[str, Any]]:
    """The outages `GET /api/v1/outages` lists, once it lists any (a flag raised now shows
    within OUTAGE_CACHE_SECONDS)."""
    deadline = time.monotonic() + timeout
    while True:
        listed: list[dict[str, Any]] = gw.get("/api/v1/outages").json()["data"]
        if listed:
            return listed
        assert time.monotonic() < deadline, "the outage was never listed"
        time.sleep(0.05)
