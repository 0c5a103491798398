"""The upstream seam (issue 18): upstream/ raises typed errors; the services of network,
plans, accounts and diagnose never read an upstream HTTP status nor build upstream paths."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from isp_gateway.store import MemoryStore
from isp_gateway.upstream.budget import RateBudget
from isp_gateway.upstream.gateway import UpstreamGateway, build_http_client
from isp_gateway.upstream.ping import (
    PingRefused,
    PingServiceUnknown,
    PingTaskNotFound,
    create_ping,
    read_task,
)
from isp_gateway.upstream.plans import PCQ, PPPOE, SIMPLE_QUEUE, Plan, detail_kind, has_detail
from isp_gateway.upstream.routers import fetch_client_router
from tests.conftest import Simulator, gateway_settings

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "isp_gateway"
SERVICES = ("network", "plans", "accounts", "diagnose")
# What only upstream/ may know: HTTP statuses of the upstream, its detail paths, its 4xx.
FORBIDDEN = re.compile(r"upstream_status|DETAIL_PATHS|UpstreamRejected|\.status_code\s*[!=]=")


@pytest.mark.parametrize("feature", SERVICES)
def test_services_read_no_upstream_status_or_path(feature: str) -> None:
    for path in sorted((PACKAGE / feature).glob("*.py")):
        text = path.read_text()
        assert not FORBIDDEN.search(text), f"{path.name} reads what only upstream/ may know"
        assert not re.search(r"[\"']api/", text.replace("`GET api/router/`", "")), path.name


def test_plan_detail_kinds_stay_inside_upstream() -> None:
    def plan(kind: str) -> Plan:
        return Plan(plan_id=1, name="x", type=kind)

    assert detail_kind(plan(PPPOE)) == "pppoe" and has_detail(plan(PPPOE))
    assert detail_kind(plan(SIMPLE_QUEUE)) == "queue" and has_detail(plan(SIMPLE_QUEUE))
    assert detail_kind(plan(PCQ)) is None and not has_detail(plan(PCQ))


@pytest.mark.anyio
async def test_ping_module_raises_typed_errors(simulator: Simulator, password_hash: str) -> None:
    settings = gateway_settings(simulator.url, password_hash)
    store = MemoryStore()
    async with build_http_client(settings) as http:
        gateway = UpstreamGateway(settings, http, RateBudget(store, 10**6, 10**7))
        known = simulator.state.dataset.clients[0]["id_servicio"]
        unknown = max(c["id_servicio"] for c in simulator.state.dataset.clients) + 1000
        # An unknown service: its own error, not a 404 for the service to read.
        with pytest.raises(PingServiceUnknown):
            await create_ping(gateway, unknown, 4)
        # Any other refusal (the upstream's 400 on a bad count): refused, not a status.
        with pytest.raises(PingRefused):
            await create_ping(gateway, known, 1000)
        task_id = await create_ping(gateway, known, 4)
        assert (await read_task(gateway, task_id)).state in ("running", "success")
        # A task the upstream does not know, and one whose id is no plain id.
        for gone in ("0123456789abcdef", "../clientes/1"):
            with pytest.raises(PingTaskNotFound):
                await read_task(gateway, gone)
        # The one-client endpoint not knowing a service names no router (no 404 to read).
        assert await fetch_client_router(gateway, unknown) is None
