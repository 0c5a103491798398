"""The Store contract, run against MemoryStore, the real Redis (db 11) and a Redis master
found through Sentinel; and how the store finds its master through Sentinel when sentinels
are down or the master is demoted (test_redis_workers.py: two workers on one Redis, and a
Redis that freezes or drops its connections).

Redis must be running: these tests fail, never skip, when it is not, because the multi-worker
shape depends on it behaving exactly like the memory store. Keys carry a per-run namespace and
only those are deleted (no FLUSHDB): several suites may share this Redis at the same time.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from isp_gateway.kit.errors import StoreUnavailable
from isp_gateway.store import LockTimeout, Store
from isp_gateway.store.redis import DEFAULT_TIMEOUT_SECONDS, RedisStore, SentinelMaster
from tests.conftest import start_sentinel_group
from tests.support import (
    RUN,
    SENTINEL_MASTER,
    SentinelGroup,
    free_port,
    memory_or_redis,
    redis_store_on,
    wait_until_async,
)

REDIS_DB = 11


def k(name: str) -> str:
    """This run's key for `name`."""
    return f"{RUN}:{name}"


async def gone(store: Store, key: str) -> bool:
    """Whether `key` has expired (or was never there)."""
    return await store.get(key) is None


pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def sentinel_group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SentinelGroup]:
    """A master with one replica and one sentinel, shared by this module's contract tests."""
    group = start_sentinel_group(tmp_path_factory.mktemp("sentinel"), sentinels=1, quorum=1)
    yield group
    group.stop()


def through_sentinel(group: SentinelGroup, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> RedisStore:
    sentinels = tuple(("127.0.0.1", sentinel.port) for sentinel in group.sentinels)
    return RedisStore(timeout=timeout, sentinel=SentinelMaster(sentinels, SENTINEL_MASTER))


@pytest.fixture(params=["memory", "redis", "sentinel"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    keys = f"ispgw:{RUN}:*"
    if request.param != "sentinel":
        async with memory_or_redis(request, REDIS_DB, keys) as store:
            yield store
        return
    group = request.getfixturevalue("sentinel_group")
    async with redis_store_on(through_sentinel(group), group.master.url + "/0", keys) as store:
        yield store


@pytest.mark.parametrize(
    "value",
    [
        {"a": 1, "b": [1, 2.5, "x"], "c": None, "d": True},
        [1, "two", {"three": 3}],
        "José Pérez",
        42,
        3.25,
        False,
    ],
)
async def test_values_round_trip(store: Store, value: Any) -> None:
    await store.set(k("k"), value)
    assert await store.get(k("k")) == value


async def test_get_absent_is_none(store: Store) -> None:
    assert await store.get(k("missing")) is None
    assert await store.ttl(k("missing")) is None
    await store.delete(k("missing"))  # no error


async def test_set_overwrites_and_delete_removes(store: Store) -> None:
    await store.set(k("k"), 1)
    await store.set(k("k"), 2)
    assert await store.get(k("k")) == 2
    await store.delete(k("k"))
    assert await store.get(k("k")) is None


async def test_ttl_expiry(store: Store) -> None:
    # 1 s: the four commands before the get still run within it from a stalled test process.
    await store.set(k("short"), "v", ttl=1)
    await store.set(k("forever"), "v")
    remaining = await store.ttl(k("short"))
    assert remaining is not None and 0 < remaining <= 1
    assert await store.ttl(k("forever")) is None
    assert await store.get(k("short")) == "v"
    await wait_until_async(lambda: gone(store, k("short")), message="the short key to expire")
    assert await store.get(k("short")) is None
    assert await store.ttl(k("short")) is None
    assert await store.get(k("forever")) == "v"


@pytest.mark.parametrize("ttl", [0, 0.0004])
async def test_zero_or_tiny_ttl_expires_at_once(store: Store, ttl: float) -> None:
    # A caller may pass a computed ttl that rounds to nothing (NEGATIVE_CACHE_SECONDS=0);
    # both stores must treat it as "already expired", not fail.
    await store.set(k("k"), "v", ttl=ttl)
    assert await store.set_if_absent(k("n"), "v", ttl=ttl) is True
    # At once: at the next 5 ms poll (a ttl of 0.4 ms may outlive the call by that much);
    # the 1 s timeout is only for a reply read late by a stalled test process.
    for key in (k("k"), k("n")):
        await wait_until_async(lambda key=key: gone(store, key), timeout=1, interval=0.005)
    assert await store.get(k("k")) is None
    assert await store.get(k("n")) is None


async def test_set_if_absent(store: Store) -> None:
    # 1 s: the second set and the get still run within it from a stalled test process.
    assert await store.set_if_absent(k("once"), {"first": True}, ttl=1) is True
    assert await store.set_if_absent(k("once"), {"first": False}, ttl=1) is False
    assert await store.get(k("once")) == {"first": True}
    await wait_until_async(lambda: gone(store, k("once")), message="the first value to expire")
    assert await store.set_if_absent(k("once"), {"second": True}) is True
    assert await store.get(k("once")) == {"second": True}


async def test_set_if_absent_is_atomic_under_concurrency(store: Store) -> None:
    results = await asyncio.gather(*(store.set_if_absent(k("race"), i) for i in range(20)))
    assert results.count(True) == 1
    assert await store.get(k("race")) == results.index(True)


async def test_incr_counts_and_keeps_the_first_ttl(store: Store) -> None:
    # A 2 s window, half of it run before the second incr: the window still has 1 s for the
    # commands after it (a stalled test process included), and an expiry pushed back would
    # show 2 s left, not 1.
    assert await store.incr(k("c"), 1, ttl=2) == 1

    async def half_gone() -> bool:  # the window has run for a while (1 s or more)
        left = await store.ttl(k("c"))
        return left is not None and left <= 1.0

    await wait_until_async(half_gone, message="the counter's window to run 1 s")
    assert await store.incr(k("c"), 2, ttl=2) == 3
    remaining = await store.ttl(k("c"))
    # Not pushed back by the second incr: the window's expiry is set once.
    assert remaining is not None and remaining <= 1.0
    assert await store.incr(k("c"), -1) == 2
    assert await store.get(k("c")) == 2
    await wait_until_async(lambda: gone(store, k("c")), message="the counter to expire")
    assert await store.get(k("c")) is None
    assert await store.incr(k("c"), 1, ttl=0.6) == 1


async def test_incr_without_ttl_never_expires(store: Store) -> None:
    assert await store.incr(k("n")) == 1
    assert await store.incr(k("n")) == 2
    assert await store.ttl(k("n")) is None


async def test_incr_is_atomic_under_concurrency(store: Store) -> None:
    await asyncio.gather(*(store.incr(k("hits"), 1, ttl=10) for _ in range(50)))
    assert await store.get(k("hits")) == 50


async def test_a_cancelled_call_never_returns_as_if_it_had_not_been(store: Store) -> None:
    # A cancellation that lands inside a command must end the caller's task. redis-py's
    # client let a good part of them go (the command returned normally and the task ran
    # on): a background page paused on the budget then outlived the service's shutdown.
    chance = random.Random(20261123)
    lost = 0
    for _ in range(400):

        async def calls() -> int:
            await store.incr(k("cancel"), 1, ttl=60)
            await store.get(k("cancel"))
            await store.get_many([k("cancel")])
            task = asyncio.current_task()
            assert task is not None
            return task.cancelling()

        task = asyncio.ensure_future(calls())
        await asyncio.sleep(chance.random() * 0.002)  # a random moment to cancel at
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            lost += await task > 0
    assert lost == 0


async def test_a_lock_wait_ends_when_its_task_is_cancelled(store: Store) -> None:
    async with store.lock(k("held"), timeout=30):
        waiter = asyncio.ensure_future(_hold(store, k("held")))
        # Real time for the waiter to poll the held lock a few times (Redis: every 0.1 s):
        # nothing to observe, it only waits.
        await asyncio.sleep(0.25)
        waiter.cancel()
        done, _ = await asyncio.wait({waiter}, timeout=2)
        assert waiter in done and waiter.cancelled()


async def test_a_lock_whose_task_is_cut_short_anywhere_is_released(store: Store) -> None:
    # Issue 21: a request cut short (cancelled while it takes, holds or gives back its zone
    # lock, even twice) must not leave the lock to block the zone until it expires. Taken
    # in Redis by an attempt whose answer the cancellation cut off, it was left behind.
    chance = random.Random(20261124)
    for _ in range(200):

        async def held() -> None:
            async with store.lock(k("cut"), timeout=60, blocking_timeout=5):
                await asyncio.sleep(chance.random() * 0.002)  # the holder's work

        task = asyncio.ensure_future(held())
        for _ in range(chance.choice((1, 2))):
            await asyncio.sleep(chance.random() * 0.003)  # a random moment to cancel at
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        # Free within moments (a release a second cancel cut off goes on by itself).
        async with store.lock(k("cut"), timeout=5, blocking_timeout=1):
            pass


async def _hold(store: Store, name: str) -> None:
    async with store.lock(name, timeout=30):
        pytest.fail("acquired a held lock")


async def test_lock_mutual_exclusion(store: Store) -> None:
    inside = 0
    overlaps = 0
    order: list[int] = []

    async def worker(n: int) -> None:
        nonlocal inside, overlaps
        async with store.lock(k("zone:7"), timeout=5):
            inside += 1
            overlaps += inside > 1
            await asyncio.sleep(0.02)  # the holder's work
            order.append(n)
            inside -= 1

    await asyncio.gather(*(worker(n) for n in range(6)))
    assert overlaps == 0
    assert sorted(order) == list(range(6))


async def test_locks_by_different_names_do_not_block(store: Store) -> None:
    async with store.lock(k("a"), timeout=5), store.lock(k("b"), timeout=5, blocking_timeout=0.2):
        pass


async def test_lock_blocking_timeout_raises_lock_timeout(store: Store) -> None:
    async with store.lock(k("busy"), timeout=5):
        started = time.monotonic()
        with pytest.raises(LockTimeout):
            async with store.lock(k("busy"), timeout=5, blocking_timeout=0.2):
                pytest.fail("acquired a held lock")
        waited = time.monotonic() - started
        # redis-py polls every 0.1 s and gives up when the next poll would be late.
        assert 0.05 <= waited < 2.0
    # Released: free again at once.
    async with store.lock(k("busy"), timeout=5, blocking_timeout=0.2):
        pass


async def test_lock_released_on_error(store: Store) -> None:
    with pytest.raises(ValueError):
        async with store.lock(k("err"), timeout=5):
            raise ValueError("inside")
    async with store.lock(k("err"), timeout=5, blocking_timeout=0.2):
        pass


async def test_no_sentinel_answering_is_store_unavailable_at_once() -> None:
    sentinels = (("127.0.0.1", free_port()), ("127.0.0.1", free_port()))
    store = RedisStore(timeout=0.5, sentinel=SentinelMaster(sentinels, SENTINEL_MASTER))
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            await store.get("probe")
        with pytest.raises(StoreUnavailable):
            async with store.lock("zone:1", timeout=5, blocking_timeout=1):
                pass
        assert time.monotonic() - started < 2
    finally:
        await store.close()


async def test_discoveries_at_once_all_find_the_master_past_a_dead_sentinel(
    sentinel_group: SentinelGroup,
) -> None:
    """A failover makes every connection ask the sentinels at once. With the first sentinel
    down, redis-py's own discovery found no master for 19 of 20 of them (its list reordered
    under it), and could lose a sentinel from its list for good."""
    live = ("127.0.0.1", sentinel_group.sentinels[0].port)
    sentinels = (("127.0.0.1", free_port()), live, ("127.0.0.1", free_port()))
    store = RedisStore(sentinel=SentinelMaster(sentinels, SENTINEL_MASTER))
    try:
        found = await asyncio.gather(*(store.get(f"probe:{n}") for n in range(20)))
        assert found == [None] * 20
        # Every sentinel stays in the list once, the one that answered first.
        assert store._sentinel is not None
        listed = store._sentinel.sentinels
        assert len(listed) == len(set(map(id, listed))) == 3
        assert listed[0].connection_pool.connection_kwargs["port"] == live[1]
    finally:
        await store.close()


async def test_the_store_follows_a_master_demoted_under_it(tmp_path: Path) -> None:
    """Issue 21: a store still connected to a master that became a replica (its connection
    kept, its writes answered READONLY) asks the sentinels again and writes to the new
    master, without an error reaching the caller. Locks, the audit's stream and
    `set_replicated` go through it like any command."""
    group = start_sentinel_group(tmp_path, sentinels=1, quorum=1)
    old, new = group.master, group.replicas[0]
    store = through_sentinel(group)
    try:
        await store.set("k", 1)  # its connection to the old master stays in the pool
        # The roles swap behind the store's back (the old master keeps its clients), and the
        # sentinel is told the new master's address, without a failover of its own.
        with redis.Redis(port=new.port) as client:
            client.replicaof("NO", "ONE")
        with redis.Redis(port=old.port) as client:
            client.replicaof("127.0.0.1", new.port)
        with redis.Redis(port=group.sentinels[0].port) as client:
            client.sentinel_remove(SENTINEL_MASTER)
            client.sentinel_monitor(SENTINEL_MASTER, "127.0.0.1", new.port, 1)
        await store.set("k", 2)
        assert await store.get("k") == 2
        with redis.Redis(port=old.port) as client:
            assert client.info("errorstats")["errorstat_READONLY"]["count"] >= 1
        with redis.Redis(port=new.port) as client:
            assert client.get("ispgw:k") == b"2"
        async with store.lock("zone:1", timeout=5, blocking_timeout=1):
            assert await store.incr("n", 1, ttl=10) == 1
        await store.log_append("audit", {"event": "x"}, 100)
        assert [value for _, value in await store.log_read("audit", 10)] == [{"event": "x"}]
        with redis.Redis(port=new.port) as client:
            client.set("probe", 1)
        with redis.Redis(port=old.port) as client:  # now the new master's replica
            # The new master streams its writes to it.
            message = "the old master to copy the new one"
            await wait_until_async(lambda: client.get("probe") is not None, message=message)
            await store.set_replicated("mark", {"after_id": 7}, ttl=10)
            assert client.get("ispgw:mark") == b'{"after_id":7}'
    finally:
        await store.close()
        group.stop()
