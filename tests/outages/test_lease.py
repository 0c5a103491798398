"""Store.lease (kit/storage.py): work one worker does at a time, taken over when its holder
stops renewing; the same in memory and in Redis."""

from __future__ import annotations

import asyncio

import pytest

from isp_gateway.store import Store
from tests.support import memory_or_redis_store, wait_until_async

pytestmark = pytest.mark.anyio

REDIS_DB = 1


store = memory_or_redis_store(REDIS_DB, "ispgw:test-lease:*")


async def test_one_holder_renews_others_wait_until_it_stops(store: Store) -> None:
    key = "test-lease:sender"
    # Taken for 0.5 s and renewed at once for 3 s: still a's a second on, past the first
    # term, only by the renewal. The 3 s keep each check far from the lease's end, so that
    # a stalled test process (up to a second under CI load) does not see it run out.
    assert await store.lease(key, "a", 0.5)
    assert await store.lease(key, "a", 3)  # renewed
    assert not await store.lease(key, "b", 3)
    await asyncio.sleep(1)
    assert not await store.lease(key, "b", 3)  # still a's: the renewal held it
    assert await store.lease(key, "a", 0.5)  # renewed again, then a stops renewing
    await wait_until_async(
        lambda: store.lease(key, "b", 3), message="b to take the lease over once a's ran out"
    )
    assert not await store.lease(key, "a", 3)
    assert await store.lease(key, "b", 0)  # given up
    assert await store.lease(key, "a", 3)
