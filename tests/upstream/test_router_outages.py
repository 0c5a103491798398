"""upstream/routers.py reads what an outage notice needs (router id, name, `falla_general`,
its description) from the simulator's catalogue, flags raised and cleared at runtime or set
from the start."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from isp_gateway.store import MemoryStore
from isp_gateway.upstream import routers
from isp_gateway.upstream.budget import RateBudget
from isp_gateway.upstream.gateway import UpstreamGateway, build_http_client
from tests.conftest import Simulator, StartSimulator, gateway_settings

pytestmark = pytest.mark.anyio


@pytest.fixture
async def connect(password_hash: str) -> AsyncIterator[Callable[[str], UpstreamGateway]]:
    clients: list[httpx.AsyncClient] = []

    def make(url: str) -> UpstreamGateway:
        settings = gateway_settings(url, password_hash)
        http = build_http_client(settings)
        clients.append(http)
        budget = RateBudget(MemoryStore(), 100_000, 1_000_000)
        return UpstreamGateway(settings, http, budget)

    yield make
    for http in clients:
        await http.aclose()


def control(sim: Simulator, body: dict[str, Any]) -> None:
    answer = httpx.put(f"{sim.url}/_sim/routers", json=body, timeout=5)
    assert answer.status_code == 200, answer.text


async def test_a_flag_raised_and_cleared_is_read_at_once(
    start_simulator: StartSimulator, connect: Callable[[str], UpstreamGateway]
) -> None:
    sim = start_simulator(clients=60)
    gateway = connect(sim.url)
    target = sim.state.dataset.routers[2]
    before = await routers.fetch_routers(gateway, background=False)
    assert len(before) == len(sim.state.dataset.routers)
    assert not any(router.outage for router in before)
    control(sim, {"router_id": target["id"], "outage": True, "description": "Corte de fibra"})
    flagged = [r for r in await routers.fetch_routers(gateway, background=False) if r.outage]
    assert [(r.router_id, r.name, r.outage_description) for r in flagged] == [
        (target["id"], target["nombre"], "Corte de fibra")
    ]
    control(sim, {"router_id": target["id"], "outage": False})
    after = await routers.fetch_routers(gateway, background=False)
    assert not any(router.outage for router in after)
    assert all(router.outage_description is None for router in after)


async def test_a_router_in_outage_from_the_start_and_its_clients(
    start_simulator: StartSimulator, connect: Callable[[str], UpstreamGateway]
) -> None:
    sim = start_simulator(clients=60, outages={1: "Mantenimiento programado"})
    gateway = connect(sim.url)
    (flagged,) = [r for r in await routers.fetch_routers(gateway, background=False) if r.outage]
    assert (flagged.router_id, flagged.outage_description) == (1, "Mantenimiento programado")
    # A client of that router names it (the affected services of a notice).
    client = next(c for c in sim.state.dataset.clients if c["router"]["id"] == 1)
    assert await routers.fetch_client_router(gateway, client["id_servicio"]) == 1
