"""Store.lease (kit/storage.py): work one worker does at a time, taken over when its holder
stops renewing; the same in memory and in Redis."""

from __future__ import annotations

import asyncio

import pytest

from isp_gateway.store import Store
from tests.support import memory_or_redis_store

pytestmark = pytest.mark.anyio

REDIS_DB = 1


store = memory_or_redis_store(REDIS_DB, "ispgw:test-lease:*")


async def test_one_holder_renews_others_wait_until_it_stops(store: Store) -> None:
    key = "test-lease:sender"
    assert await store.lease(key, "a", 0.5)
    assert not await store.lease(key, "b", 0.5)
    assert await store.lease(key, "a", 0.5)  # renewed
    await asyncio.sleep(0.3)
    assert await store.lease(key, "a", 0.5)  # renewed again before it ran out
    await asyncio.sleep(0.3)
    assert not await store.lease(key, "b", 0.5)  # still a's: the renewal held it
    await asyncio.sleep(0.6)  # a stopped renewing
    assert await store.lease(key, "b", 0.5)
    assert not await store.lease(key, "a", 0.5)
    assert await store.lease(key, "b", 0)  # given up
    assert await store.lease(key, "a", 0.5)
