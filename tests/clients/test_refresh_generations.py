"""Workers sharing a store replace a generation of a cached list once, not once each."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from isp_gateway.kit.cache import CachedResource
from isp_gateway.store import MemoryStore
from tests.support import wait_until_async


def test_a_refresh_that_finds_a_newer_generation_does_not_load_again() -> None:
    """Two workers find generation G due at the same moment (both schedule from G's
    stamp). The first loads; the second asks just after that load returned, while the
    first is still building its index, and must take the first one's generation."""

    async def scenario() -> tuple[int, list[Any], int]:
        store = MemoryStore()
        loads = 0
        building = threading.Event()
        release = threading.Event()

        async def loader(background: bool) -> dict[str, int]:
            nonlocal loads
            loads += 1
            return {"generation": loads}

        def derive(value: dict[str, int]) -> dict[str, int]:
            if value["generation"] == 2 and not release.is_set():
                building.set()  # generation 2 is loaded and being built, lock held
                release.wait(10)
            return value

        first = CachedResource(store, "things", loader, derive, ttl=10, stale_ttl=60)
        second = CachedResource(store, "things", loader, derive, ttl=10, stale_ttl=60)
        await first.refresh()
        seen = await first.loaded_at()
        assert seen is not None

        one = asyncio.create_task(first.refresh(seen))
        assert await asyncio.to_thread(building.wait, 10)
        other = asyncio.create_task(second.refresh(seen))

        def second_waits() -> bool:  # for the store's lock, the first one's
            lock = store._locks.get("lock:cache:things")
            return bool(lock is not None and getattr(lock, "_waiters", None))

        await wait_until_async(second_waits, message="the second refresh to wait for the lock")
        release.set()
        await asyncio.gather(one, other)
        after_race = loads
        locals_ = [first.local, second.local]
        # A refresh that names no generation (a plan missing from the catalogue) still
        # reads the upstream even though the copy is new.
        await second.refresh()
        return after_race, locals_, loads

    after_race, locals_, loads = asyncio.run(scenario())
    assert after_race == 2
    assert locals_ == [{"generation": 2}, {"generation": 2}]
    assert loads == 3


def test_a_miss_does_not_take_a_load_that_began_before_it() -> None:
    """A plan created upstream, then asked for while a refresh that read the list before it
    existed is still in flight: the miss waits for that load, then reads the list again
    (joining it answered 404 for a plan the upstream has)."""

    async def scenario() -> tuple[list[str], int]:
        upstream = ["old"]
        loads = 0
        first_read = asyncio.Event()
        release = asyncio.Event()

        async def loader(background: bool) -> list[str]:
            nonlocal loads
            loads += 1
            seen = list(upstream)
            if loads == 2:
                first_read.set()  # the refresh has read the list and is still going
                await release.wait()
            return seen

        things = CachedResource(MemoryStore(), "things", loader, list, ttl=10, stale_ttl=60)
        await things.refresh()
        in_flight = asyncio.create_task(things.refresh())
        await first_read.wait()
        upstream.append("new")  # created upstream after that read
        missed_at = time.time()
        miss = asyncio.create_task(things.refresh(started_after=missed_at))
        await asyncio.sleep(0)  # one turn of the loop: the miss starts and joins the load
        release.set()
        await asyncio.gather(in_flight, miss)
        snapshot = await things.get()
        return snapshot.value, loads

    value, loads = asyncio.run(scenario())
    assert value == ["old", "new"]
    assert loads == 3
