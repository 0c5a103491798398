"""Single-client updates as a patch log: workers sharing Redis apply them, never rebuild.

An update (PUT, or a new customer found upstream on a lookup miss) is appended to a small
patch log of the loaded base and bumps the revision in the stamp; the whole list in the
store is not rewritten, and every other worker applies the missing revisions to its index
instead of building it again. A reload starts a new log, carrying the updates its fetch may
have missed.

Redis db 15 belongs to this module: a Redis lock outside the gateway's key prefix serialises
concurrent runs of it, and the gateway's keys (`ispgw:*`) in db 15 are deleted before and
after each test. Fails, never skips, without Redis (the guarantee depends on it).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from isp_gateway.upstream.clients import map_clients
from tests.clients.conftest import CLIENTS, StartPair, by_doc, calls, warm
from tests.conftest import Gateway, Simulator, StartGateway, StartSimulator
from tests.support import wait_until, wait_until_async

REDIS_DB = 15
BASE_KEY = "ispgw:cache:clients"
STAMP_KEY = "ispgw:cache:clients:at"
LOG_KEY = "ispgw:cache:clients:patches"


def _clear(client: redis.Redis) -> None:
    keys = list(client.scan_iter(match="ispgw:*"))
    if keys:
        client.delete(*keys)


@pytest.fixture
def db_url(redis_url: Callable[[int], str]) -> str:
    return redis_url(REDIS_DB)


@pytest.fixture
def redis_db(db_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(db_url)
    lock = client.lock("isp-gateway-tests:clients-patch-log", timeout=600, blocking_timeout=600)
    assert lock.acquire(), "another run of this module kept Redis db 15"
    try:
        _clear(client)
        yield client
    finally:
        _clear(client)
        lock.release()
        client.close()


def stamp(client: redis.Redis) -> dict[str, Any]:
    raw = client.get(STAMP_KEY)
    assert raw is not None
    value: dict[str, Any] = json.loads(raw)
    return value


def in_step(gw: Gateway, client: redis.Redis) -> None:
    """Wait until the worker holds the store's current base and revision."""

    def holds() -> bool:
        raw = client.get(STAMP_KEY)
        if raw is None:
            return False
        current = json.loads(raw)
        return bool(
            gw.runtime.services.clients.cache.local_stamp == (current["at"], current["rev"])
        )

    wait_until(holds, interval=0.01, message="the worker to take up the shared generation")


def data(response: Any) -> Any:
    assert response.status_code == 200, response.text
    return response.json()["data"]


def ids(response: Any) -> list[int]:
    return [c["service_id"] for c in data(response)]


def record_writes(gw: Gateway, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The keys this worker's store writes from now on."""
    store = gw.runtime.store
    original = store.set
    keys: list[str] = []

    async def set_and_record(key: str, value: Any, ttl: float | None = None) -> None:
        keys.append(key)
        await original(key, value, ttl)

    monkeypatch.setattr(store, "set", set_and_record)
    return keys


Workers = tuple[Simulator, Gateway, Gateway]


@pytest.fixture
def workers(
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
    data_file: Path,
    redis_db: redis.Redis,
    db_url: str,
) -> Workers:
    """Two workers on one Redis: A loaded the list, B adopted A's load."""
    sim = start_simulator(data_file=data_file)
    first = start_gateway(sim.url, REDIS_URL=db_url)
    warm(first)
    second = start_gateway(sim.url, REDIS_URL=db_url)
    in_step(second, redis_db)
    sim.state.reset_stats()
    return sim, first, second


def test_an_update_on_one_worker_is_patched_into_the_others_index(
    workers: Workers, redis_db: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim, a, b = workers
    cache_a, cache_b = a.runtime.services.clients.cache, b.runtime.services.clients.cache
    assert (cache_a.loads, cache_b.loads) == (1, 0)
    derives = (cache_a.derives, cache_b.derives)
    base = redis_db.get(BASE_KEY)
    at = stamp(redis_db)["at"]
    writes = record_writes(a, monkeypatch)

    response = a.put("/api/v1/clients/105", json={"document": "55554444", "phone": "3209998877"})
    assert response.status_code == 200
    # A read the phone field fresh before the write (CALLERS.md 2); B's reads follow.
    assert calls(sim) == 1
    sim.state.reset_stats()

    # A appended to the patch log; the whole list was not written again.
    assert "cache:clients" not in writes
    assert {"cache:clients:patches", "cache:clients:at"} <= set(writes)
    assert redis_db.get(BASE_KEY) == base
    assert stamp(redis_db) == {"at": at, "rev": 1}
    log = json.loads(redis_db.get(LOG_KEY) or b"null")
    assert log["base"] == at
    assert [(i["rev"], i["item"]["client"]["document"]) for i in log["items"]] == [(1, "55554444")]

    # B sees it at once, from its index: lookups and search, no upstream call.
    assert data(b.get("/api/v1/clients/by-document/55554444"))["service_id"] == 105
    assert data(b.get("/api/v1/clients/by-phone/3209998877"))["service_id"] == 105
    assert ids(b.get("/api/v1/clients/search", params={"q": "55554444"})) == [105]
    assert ids(b.get("/api/v1/clients/search", params={"q": "ROSA 3209998877"})) == [105]
    assert data(b.get("/api/v1/clients/by-service-id/105"))["document"] == "55554444"
    assert cache_b.local is not None and by_doc(cache_b.local, "11122233") is None
    assert calls(sim) == 0
    # ...and neither worker rebuilt its index: the patch was applied to it.
    assert (cache_a.derives, cache_b.derives) == derives
    assert cache_a.local_stamp == cache_b.local_stamp == (at, 1)

    # A second update: revision 2, B applies only that one.
    assert a.put("/api/v1/clients/101", json={"phone": "3001110000"}).status_code == 200
    assert data(b.get("/api/v1/clients/by-phone/3001110000"))["service_id"] == 101
    assert data(b.get("/api/v1/clients/by-document/55554444"))["service_id"] == 105
    assert cache_b.local_stamp == (at, 2)
    assert (cache_a.derives, cache_b.derives) == derives
    assert redis_db.get(BASE_KEY) == base
    assert calls(sim) == 1  # A's fresh read of 101's phone field; B made none


def test_a_reload_starts_an_empty_log_whose_list_holds_the_updates(
    workers: Workers, redis_db: redis.Redis
) -> None:
    sim, a, b = workers
    assert a.put("/api/v1/clients/105", json={"document": "55554444"}).status_code == 200
    assert stamp(redis_db)["rev"] == 1
    loop = a.runtime.services.clients.cache._periodic.get_loop()
    asyncio.run_coroutine_threadsafe(a.runtime.services.clients.cache.refresh(), loop).result(10)
    assert a.runtime.services.clients.cache.loads == 2
    new = stamp(redis_db)
    assert new["rev"] == 0
    assert json.loads(redis_db.get(LOG_KEY) or b"null") == {"base": new["at"], "items": []}
    assert b"55554444" in (redis_db.get(BASE_KEY) or b"")
    sim.state.reset_stats()
    for gw in (a, b):
        assert data(gw.get("/api/v1/clients/by-document/55554444"))["service_id"] == 105
    assert calls(sim) == 0


def test_a_new_customer_found_on_one_worker_is_patched_into_the_other(
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
    data_file: Path,
    redis_db: redis.Redis,
    db_url: str,
) -> None:
    # A list loaded before customer 107 existed upstream, still fresh in the shared store.
    at = time.time()
    records = map_clients([row for row in CLIENTS if row["id_servicio"] != 107])
    redis_db.set(BASE_KEY, json.dumps({"loaded_at": at, "value": {"records": records}}), ex=600)
    redis_db.set(STAMP_KEY, json.dumps({"at": at, "rev": 0}), ex=600)
    sim = start_simulator(data_file=data_file)
    a = start_gateway(sim.url, REDIS_URL=db_url)
    b = start_gateway(sim.url, REDIS_URL=db_url)
    in_step(a, redis_db)
    in_step(b, redis_db)
    cache_a, cache_b = a.runtime.services.clients.cache, b.runtime.services.clients.cache
    assert (cache_a.loads, cache_b.loads) == (0, 0)  # both adopted the stored list
    derives = (cache_a.derives, cache_b.derives)
    sim.state.reset_stats()

    # A does not know 107: it asks the upstream, answers, and logs the customer.
    assert data(a.get("/api/v1/clients/by-document/99887766"))["service_id"] == 107
    assert calls(sim) == 1
    wait_until(lambda: stamp(redis_db)["rev"] == 1, message="the new customer to be logged")
    stored = json.loads(redis_db.get(BASE_KEY) or b"null")
    assert stored["loaded_at"] == at and len(stored["value"]["records"]) == len(CLIENTS) - 1

    # B finds 107 in its own index, patched, without asking the upstream or rebuilding.
    assert data(b.get("/api/v1/clients/by-document/99887766"))["service_id"] == 107
    assert data(b.get("/api/v1/clients/by-phone/3004445567"))["service_id"] == 107
    assert ids(b.get("/api/v1/clients/search", params={"q": "jose perez"})) == [107]
    assert calls(sim) == 1
    assert (cache_a.derives, cache_b.derives) == derives
    assert cache_b.local_stamp == (at, 1)


class HeldLoads:
    """Makes a worker's next list loads fetch, then wait for `release` before publishing,
    so an update can land between a reload's fetch and its publication."""

    def __init__(self, gw: Gateway) -> None:
        self.cache = gw.runtime.services.clients.cache
        self.loop = gw.runtime.services.clients.cache._periodic.get_loop()
        self.fetched = threading.Event()
        self.release = threading.Event()
        original = self.cache._loader

        async def held(background: bool) -> Any:
            value = await original(background)
            self.fetched.set()
            await wait_until_async(self.release.is_set, timeout=30, interval=0.01)
            return value

        self.cache._loader = held

    def start_reload(self) -> Any:
        async def reload() -> None:
            # A load still in flight (the start-up one publishing after `loads` counted it)
            # would be joined and the held loader never called: let it end first.
            def settled() -> bool:
                inflight = self.cache._inflight
                return inflight is None or inflight.done()

            await wait_until_async(settled, interval=0.01)
            await self.cache.refresh()

        future = asyncio.run_coroutine_threadsafe(reload(), self.loop)
        assert self.fetched.wait(10), "the reload did not fetch"
        return future


def test_an_update_landing_during_a_reload_is_kept(
    workers: Workers,
    start_gateway: StartGateway,
    redis_db: redis.Redis,
    db_url: str,
) -> None:
    sim, a, b = workers
    held = HeldLoads(a)
    reload = held.start_reload()  # A fetched the list without the change below
    # B's update does not wait for A's reload (it would have waited the whole reload).
    assert b.put("/api/v1/clients/105", json={"document": "55554444"}).status_code == 200
    held.release.set()
    reload.result(10)
    assert held.cache.loads == 2

    # The new base lacks the change (the race happened) and its log carries it.
    assert b"55554444" not in (redis_db.get(BASE_KEY) or b"")
    new = stamp(redis_db)
    assert new["rev"] == 1
    log = json.loads(redis_db.get(LOG_KEY) or b"null")
    assert log["base"] == new["at"]
    assert [i["item"]["client"]["document"] for i in log["items"]] == ["55554444"]

    sim.state.reset_stats()
    c = start_gateway(sim.url, REDIS_URL=db_url)  # a worker starting now
    in_step(c, redis_db)
    for gw in (a, b, c):
        assert data(gw.get("/api/v1/clients/by-document/55554444"))["service_id"] == 105
        assert ids(gw.get("/api/v1/clients/search", params={"q": "55554444"})) == [105]
        assert gw.runtime.services.clients.cache.local_stamp == (new["at"], 1)
    assert calls(sim) == 0
    assert c.runtime.services.clients.cache.loads == 0


def test_memory_store_an_update_landing_during_a_reload_is_kept(start_pair: StartPair) -> None:
    sim, gw = start_pair()
    cache = gw.runtime.services.clients.cache
    derives = cache.derives
    held = HeldLoads(gw)
    reload = held.start_reload()
    assert gw.put("/api/v1/clients/105", json={"document": "55554444"}).status_code == 200
    # Patched at once into the index still served, not rebuilt.
    assert cache.derives == derives
    assert data(gw.get("/api/v1/clients/by-document/55554444"))["service_id"] == 105
    held.release.set()
    reload.result(10)
    assert cache.loads == 2 and cache.derives == derives + 1
    sim.state.reset_stats()
    assert data(gw.get("/api/v1/clients/by-document/55554444"))["service_id"] == 105
    assert ids(gw.get("/api/v1/clients/search", params={"q": "55554444"})) == [105]
    assert calls(sim) == 0
