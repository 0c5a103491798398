"""At scale, on a shared Redis: workers adopt the stored lists, and background paging yields
the upstream budget to interactive calls across workers."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator

import httpx
import pytest
import redis

from isp_gateway.kit.errors import UpstreamRateLimited
from isp_gateway.store.redis import PREFIX, RedisStore
from isp_gateway.upstream.budget import RateBudget
from tests.clients.conftest import warm
from tests.conftest import Simulator, StartGateway, StartSimulator
from tests.support import emptied_redis, wait_until

REDIS_DB = 9
# The keys the gateways of these tests write (db 9 is this suite's); only those are deleted.
OWN_PATTERNS = [f"{PREFIX}{p}*" for p in ("cache:", "lock:", "budget:", "clients:", "plans:")]


@pytest.fixture
def db_url(redis_url: Callable[[int], str]) -> str:
    return redis_url(REDIS_DB)


@pytest.fixture
def own_keys(db_url: str) -> Iterator[redis.Redis]:
    with emptied_redis(db_url, *OWN_PATTERNS) as client:
        yield client


def upstream_calls(sim: Simulator) -> int:
    """Calls the simulator answered, read from its own stats endpoint."""
    return int(httpx.get(f"{sim.url}/_sim/stats", timeout=10).json()["total"])


def test_a_new_worker_adopts_the_lists_in_redis_without_the_upstream(
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
    own_keys: redis.Redis,
    db_url: str,
) -> None:
    sim = start_simulator(clients=300)
    settings = {"REDIS_URL": db_url, "UPSTREAM_PAGE_SIZE": 50}
    first = start_gateway(sim.url, **settings)
    warm(first)  # six pages
    wait_until(
        lambda: first.runtime.services.plans.catalogue.loads >= 1,
        timeout=30,
        message="the plans to load",
    )
    httpx.post(f"{sim.url}/_sim/reset-stats", timeout=10)
    known = sim.state.dataset.clients[17]

    # A restarted process (or a new replica) on the same Redis.
    second = start_gateway(sim.url, **settings)
    wait_until(
        lambda: second.runtime.services.clients.cache.local is not None,
        timeout=30,
        message="the clients to be adopted",
    )
    wait_until(
        lambda: second.runtime.services.plans.catalogue.local is not None,
        timeout=30,
        message="the plans to be adopted",
    )
    found = second.get(f"/api/v1/clients/by-document/{known['cedula']}")
    assert found.status_code == 200
    assert found.json()["data"]["service_id"] == known["id_servicio"]
    assert second.get("/api/v1/clients/search", params={"q": known["cedula"]}).status_code == 200
    # Ready without a single upstream call, and no load of its own.
    assert upstream_calls(sim) == 0
    assert second.runtime.services.clients.cache.loads == 0
    # It learned the list's size from the store, so it plans like the first worker.
    assert second.runtime.planner.plan()["clients"].pages == 6
    assert (
        second.runtime.services.clients.cache.refresh_after
        == first.runtime.services.clients.cache.refresh_after
    )


def test_a_paused_refresh_on_one_worker_leaves_interactive_calls_to_another(
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
    own_keys: redis.Redis,
    db_url: str,
) -> None:
    # 300 clients at 10 a page: 30 pages, twice the background share of a minute of 20.
    sim = start_simulator(clients=300, max_page_size=10)
    settings = {
        "REDIS_URL": db_url,
        "UPSTREAM_PAGE_SIZE": 10,
        "UPSTREAM_RATE_PER_MINUTE": 20,
        "UPSTREAM_RATE_PER_HOUR": 1000,
        # CALLERS.md 6: the one bot here is past its end user's share (5 of 20) at its sixth
        # call, and past a share the last 10 % of the minute stays for others. This test is
        # about the interactive reserve a paused refresh leaves: all of it the bot's.
        "UPSTREAM_SHARE_RESERVE": 0,
    }
    loader = start_gateway(sim.url, **settings)

    def background_calls() -> int:
        # Every call so far is a whole-list load (clients, plans, and any other list).
        return sum(sim.state.calls.values())

    wait_until(lambda: background_calls() >= 14, timeout=30, message="the loads to start")
    other = start_gateway(sim.url, **settings)
    # Real time: the loads have spent the background share and are paused; what must not
    # happen meanwhile is one more call.
    time.sleep(1.0)
    # The background share of the minute, whatever the lists, and not every client page.
    assert background_calls() == 14, dict(sim.state.calls)  # which calls, should it fail
    assert sim.state.calls["GET /api/clientes/"] < 30

    # Interactive calls on the other worker (the minute's reserve of six): lookup misses
    # asked upstream, answered at once. Upper case: one question each (a document with
    # lower-case letters is asked in upper case and as typed).
    started = time.monotonic()
    for n in range(5):
        missing = other.get(f"/api/v1/clients/by-document/NOPE{n}{uuid.uuid4().hex[:6]}".upper())
        assert missing.status_code == 404, missing.text
    known = sim.state.dataset.clients[250]  # on a page the paused load has not read
    found = other.get(f"/api/v1/clients/by-document/{known['cedula']}")
    assert found.status_code == 200
    assert time.monotonic() - started < 20
    # The partial read was never published: neither worker holds a list yet.
    assert loader.runtime.services.clients.cache.local is None
    assert other.runtime.services.clients.cache.local is None
    assert own_keys.get(f"{PREFIX}cache:clients") is None


@pytest.mark.anyio
async def test_background_on_one_worker_never_takes_the_reserve_of_another(
    own_keys: redis.Redis,
    db_url: str,
) -> None:
    # Window lengths of their own, so these counters are this test's alone.
    minute = 60.0 + uuid.uuid4().int % 1000 / 1000
    workers = [RedisStore(db_url), RedisStore(db_url)]
    try:
        a, b = (
            RateBudget(s, per_minute=10, per_hour=1000, reserve=0.3, minute=minute) for s in workers
        )
        for _ in range(7):
            await a.acquire(background=True)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(a.acquire(background=True), timeout=0.5)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(b.acquire(background=True), timeout=0.5)
        for _ in range(3):  # the reserve is whole on the other worker
            await b.acquire()
        with pytest.raises(UpstreamRateLimited):
            await b.acquire()
    finally:
        for store in workers:
            await store.close()
