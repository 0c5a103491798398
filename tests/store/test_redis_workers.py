"""Two workers' view of one Redis (shared state, locks, the key prefix), and a Redis that
freezes or drops its connections: the store says StoreUnavailable within its timeout and
frees a lock as soon as Redis answers again.

Redis must be running: these tests fail, never skip, when it is not. Keys carry a per-run
namespace and only those are deleted (no FLUSHDB).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Callable

import pytest
import redis
import redis.asyncio as aioredis

from isp_gateway.kit.errors import StoreUnavailable
from isp_gateway.store import LockTimeout
from isp_gateway.store.redis import RedisStore
from tests.conftest import start_redis_server
from tests.support import RUN, delete_keys, wait_until_async

REDIS_DB = 11

pytestmark = pytest.mark.anyio


def k(name: str) -> str:
    """This run's key for `name`."""
    return f"{RUN}:{name}"


@pytest.fixture
def db_url(redis_url: Callable[[int], str]) -> str:
    return redis_url(REDIS_DB)


@pytest.fixture
async def redis_pair(db_url: str) -> AsyncIterator[tuple[RedisStore, RedisStore]]:
    """Two stores on one Redis: two workers' view of the shared state."""
    await delete_keys(db_url, f"ispgw:{RUN}:*")
    first, second = RedisStore(db_url), RedisStore(db_url)
    yield first, second
    await first.close()
    await second.close()
    await delete_keys(db_url, f"ispgw:{RUN}:*")


async def test_redis_lock_expires_when_its_holder_is_gone(
    redis_pair: tuple[RedisStore, RedisStore],
) -> None:
    # A crashed worker holds a zone lock; `timeout` frees it so the zone is not blocked forever.
    first, second = redis_pair
    holder = first.lock(k("zone:1"), timeout=0.3)
    # The clock starts before the lock is taken: its 0.3 s run from a moment after this one,
    # however long a stalled test process takes to get it (10 ms for Redis's millisecond clock).
    started = time.monotonic()
    await holder.__aenter__()
    async with second.lock(k("zone:1"), timeout=5, blocking_timeout=3):
        waited = time.monotonic() - started
    assert 0.29 <= waited < 2.5
    # The late release of an expired lock is harmless.
    await holder.__aexit__(None, None, None)


async def test_redis_state_is_shared_between_workers(
    redis_pair: tuple[RedisStore, RedisStore],
) -> None:
    first, second = redis_pair
    await first.set(k("cache:x"), {"v": 1}, ttl=10)
    assert await second.get(k("cache:x")) == {"v": 1}
    await first.incr(k("count"), 1, ttl=10)
    assert await second.incr(k("count"), 1, ttl=10) == 2
    assert await first.set_if_absent(k("idem"), 1) is True
    assert await second.set_if_absent(k("idem"), 2) is False
    async with first.lock(k("shared"), timeout=5):
        with pytest.raises(LockTimeout):
            async with second.lock(k("shared"), timeout=5, blocking_timeout=0.2):
                pass


async def test_redis_keys_are_prefixed(
    redis_pair: tuple[RedisStore, RedisStore], db_url: str
) -> None:
    first, _ = redis_pair
    await first.set(k("mine"), 1)
    client = aioredis.Redis.from_url(db_url)
    try:
        assert await client.keys(f"*{RUN}*") == [f"ispgw:{RUN}:mine".encode()]
    finally:
        await client.aclose()


async def test_a_frozen_redis_is_store_unavailable_within_its_timeout() -> None:
    """Issue 17: a Redis that is up but does not answer (SIGSTOP) held a command for good.
    Each command now waits REDIS_TIMEOUT_SECONDS once (no retry on a timeout) and raises
    StoreUnavailable, as for a dead Redis; the store answers again once Redis does."""
    server = start_redis_server()
    # A 1 s timeout: a command waits it once, never twice (a retry would take 2 s or more),
    # and 0.9 s is left for a stalled test process.
    timeout = 1.0
    store = RedisStore(server.url + "/0", timeout=timeout)
    try:
        await store.set("probe", 1)
        assert server.process is not None
        os.kill(server.process.pid, signal.SIGSTOP)
        try:
            for command in (
                lambda: store.get("probe"),
                lambda: store.incr("counter", 1, ttl=5),
                lambda: store.set_if_absent("slot", True, ttl=5),
            ):
                started = time.monotonic()
                with pytest.raises(StoreUnavailable):
                    await asyncio.wait_for(command(), 5)
                assert time.monotonic() - started < 2 * timeout - 0.1
        finally:
            os.kill(server.process.pid, signal.SIGCONT)
        # Again once Redis answers (which it may do late, after the commands it was sent).
        assert await wait_until_async(lambda: store.get("probe"), ignoring=StoreUnavailable) == 1
    finally:
        await store.close()
        server.stop()


async def test_a_lock_left_by_a_lost_connection_is_released_when_redis_answers_again() -> None:
    """A holder whose release never reached Redis (a connection lost at that moment, a
    failover) releases the lock as soon as Redis answers again, not at the lock's timeout
    (30 s here): the zone it guards is free for the next creation within a second."""
    server = start_redis_server()
    holder = RedisStore(server.url + "/0", timeout=0.3)
    other = RedisStore(server.url + "/0")
    admin = redis.Redis(port=server.port)
    try:
        async with holder.lock("zone:9", timeout=30):
            # Writes (the release's script among them) wait while paused: the release
            # times out, then its connection is dropped with the command it sent.
            admin.execute_command("CLIENT", "PAUSE", "10000", "WRITE")
        admin.execute_command("CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes")
        assert admin.exists("ispgw:lock:zone:9")
        admin.execute_command("CLIENT", "UNPAUSE")
        started = time.monotonic()
        async with other.lock("zone:9", timeout=5, blocking_timeout=5):
            waited = time.monotonic() - started
        assert waited < 2, waited
    finally:
        admin.close()
        await holder.close()
        await other.close()
        server.stop()
