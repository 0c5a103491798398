"""The store's capped log (the audit's storage), against MemoryStore and the real Redis (db 6):
newest first, paging back with `before`, the cap, copies not references."""

from __future__ import annotations

import pytest

from isp_gateway.store import MemoryStore, Store
from tests.support import RUN, memory_or_redis_store

pytestmark = pytest.mark.anyio


store = memory_or_redis_store(6, f"ispgw:{RUN}:*")


async def test_an_empty_log(store: Store) -> None:
    assert await store.log_read(f"{RUN}:a", 10) == []


async def test_newest_first_and_paging_back(store: Store) -> None:
    key = f"{RUN}:a"
    for n in range(25):
        await store.log_append(key, {"n": n}, 1000)
    await store.log_append(f"{RUN}:b", {"n": "other log"}, 1000)
    first = await store.log_read(key, 10)
    assert [v["n"] for _, v in first] == list(range(24, 14, -1))
    second = await store.log_read(key, 10, before=first[-1][0])
    assert [v["n"] for _, v in second] == list(range(14, 4, -1))
    last = await store.log_read(key, 10, before=second[-1][0])
    assert [v["n"] for _, v in last] == [4, 3, 2, 1, 0]
    assert await store.log_read(key, 10, before=last[-1][0]) == []
    ids = [entry_id for entry_id, _ in first + second + last]
    assert len(set(ids)) == 25


async def test_the_cap_keeps_at_least_the_newest(store: Store) -> None:
    key = f"{RUN}:cap"
    for n in range(300):
        await store.log_append(key, n, 20)
    kept = [v for _, v in await store.log_read(key, 1000)]
    assert kept[:20] == list(range(299, 279, -1))
    assert len(kept) < 300  # trimmed (Redis trims whole blocks: a few more may stay)
    if isinstance(store, MemoryStore):
        assert len(kept) == 20


async def test_values_are_copies(store: Store) -> None:
    key = f"{RUN}:a"
    value = {"details": {"x": 1}}
    await store.log_append(key, value, 10)
    value["details"]["x"] = 2
    ((_, read),) = await store.log_read(key, 10)
    assert read == {"details": {"x": 1}}
    read["details"]["x"] = 3
    assert (await store.log_read(key, 10))[0][1] == {"details": {"x": 1}}
