"""Refresh-ahead caching of whole upstream lists (clients, plans) through the store.

- The loaded value lives in the store with its load time, so workers sharing a Redis store
  share one copy and one refresh.
- Fresh: served as is. Past `refresh_after`: served, and one background refresh starts.
- Past `ttl`: served with `stale=True` while a refresh runs, for up to `stale_ttl`
  (stale-if-error); only the very first load makes a request wait.
- Concurrent misses make one upstream load (in-process future + the store's lock).
- `derive` builds a per-process structure (an index) once per loaded generation.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from isp_gateway.errors import UpstreamError
from isp_gateway.store import Store

log = logging.getLogger("isp_gateway.cache")

D = TypeVar("D")


@dataclass(frozen=True)
class Snapshot(Generic[D]):
    value: D
    loaded_at: float
    stale: bool


class CachedResource(Generic[D]):
    def __init__(
        self,
        store: Store,
        key: str,
        loader: Callable[[bool], Awaitable[Any]],
        derive: Callable[[Any], D],
        *,
        ttl: float,
        stale_ttl: float,
        refresh_ratio: float = 0.8,
    ) -> None:
        self._store = store
        self._key = f"cache:{key}"
        self._stamp_key = f"cache:{key}:at"
        self._loader = loader  # called with background=True/False
        self._derive = derive
        self.ttl = ttl
        self.stale_ttl = stale_ttl
        self.refresh_after = ttl * refresh_ratio
        self._local: tuple[float, D] | None = None
        self._inflight: asyncio.Task[tuple[float, Any]] | None = None
        self._background: asyncio.Task[None] | None = None
        self.loads = 0  # upstream loads made by this process, for tests and metrics

    async def _entry(self) -> tuple[float, Any] | None:
        entry = await self._store.get(self._key)
        if not isinstance(entry, dict) or "loaded_at" not in entry:
            return None
        return float(entry["loaded_at"]), entry["value"]

    async def _write(self, loaded_at: float, value: Any, ttl: float) -> None:
        await self._store.set(self._key, {"loaded_at": loaded_at, "value": value}, ttl=ttl)
        await self._store.set(self._stamp_key, loaded_at, ttl=ttl)

    async def _current(self) -> tuple[float, D] | None:
        """(load time, derived) of the cached generation. The small stamp key is read first:
        when this process already derived that generation, the (possibly large) value is
        not fetched again, which matters with Redis."""
        stamp = await self._store.get(self._stamp_key)
        local = self._local
        if local is not None and stamp is not None and float(stamp) == local[0]:
            return local
        entry = await self._entry()
        if entry is None:
            return None
        return entry[0], self._derived(*entry)

    def _derived(self, loaded_at: float, value: Any) -> D:
        if self._local is None or self._local[0] != loaded_at:
            self._local = (loaded_at, self._derive(value))
        return self._local[1]

    async def _load(self, background: bool) -> tuple[float, Any]:
        requested_at = time.time()
        async with self._store.lock(f"lock:{self._key}", timeout=120):
            # Another worker may have loaded it while we waited for the lock.
            entry = await self._entry()
            if entry is not None and entry[0] >= requested_at:
                return entry
            value = await self._loader(background)
            self.loads += 1
            loaded_at = time.time()
            # Derive (build the index) off the event loop and before publishing, so no
            # request ever builds it inline after a refresh.
            derived = await asyncio.to_thread(self._derive, value)
            self._local = (loaded_at, derived)
            await self._write(loaded_at, value, self.ttl + self.stale_ttl)
            return loaded_at, value

    async def _single_flight(self, background: bool) -> tuple[float, Any]:
        if self._inflight is None or self._inflight.done():
            self._inflight = asyncio.ensure_future(self._load(background))
        # shield: a client that disconnects must not cancel the load others wait for.
        return await asyncio.shield(self._inflight)

    def _refresh_soon(self) -> None:
        if self._background is not None and not self._background.done():
            return

        async def run() -> None:
            try:
                await self.refresh()
            except UpstreamError as exc:
                log.warning("background refresh of %s failed: %s", self._key, exc.action)
            except Exception:
                log.exception("background refresh of %s crashed", self._key)

        self._background = asyncio.ensure_future(run())

    async def refresh(self) -> None:
        """Load now (used by the periodic job and refresh-ahead), then derive."""
        loaded_at, value = await self._single_flight(background=True)
        self._derived(loaded_at, value)

    async def get(self) -> Snapshot[D]:
        current = await self._current()
        if current is None:
            loaded_at, value = await self._single_flight(background=False)
            return Snapshot(self._derived(loaded_at, value), loaded_at, False)
        loaded_at, derived = current
        age = time.time() - loaded_at
        if age >= self.refresh_after:
            self._refresh_soon()
        return Snapshot(derived, loaded_at, age >= self.ttl)

    async def fresh_local(self) -> D | None:
        """The derived value when this process holds the store's current generation and it
        is not yet due for a refresh; otherwise None, and the caller takes the regular path
        (which refreshes, marks staleness and reloads as needed)."""
        local = self._local
        if local is None or time.time() - local[0] >= self.refresh_after:
            return None
        stamp = await self._store.get(self._stamp_key)
        if stamp is None or float(stamp) != local[0]:
            return None
        return local[1]

    async def peek(self) -> Snapshot[D] | None:
        """The cached value if any, without ever calling the upstream."""
        current = await self._current()
        if current is None:
            return None
        loaded_at, derived = current
        age = time.time() - loaded_at
        if age >= self.refresh_after:
            self._refresh_soon()
        return Snapshot(derived, loaded_at, age >= self.ttl)

    async def update(
        self, mutate: Callable[[Any], Any], patch: Callable[[D, Any], D] | None = None
    ) -> None:
        """Patch the cached value in place (after a successful write upstream) and
        re-derive, keeping the load time so the refresh schedule is unchanged.

        `patch(derived, new_value)` updates this process's derived structure incrementally
        instead of rebuilding it (an O(N) index build on every write would stall requests)."""
        async with self._store.lock(f"lock:{self._key}", timeout=120):
            entry = await self._entry()
            if entry is None:
                return
            loaded_at, value = entry
            local = self._local
            new_value = mutate(value)
            remaining = self.ttl + self.stale_ttl - (time.time() - loaded_at)
            # A new generation stamp makes every process rebuild its derived index.
            stamp = loaded_at + 1e-6
            if patch is not None and local is not None and local[0] == loaded_at:
                self._local = (stamp, patch(local[1], new_value))
            await self._write(stamp, new_value, max(1.0, remaining))
            self._derived(stamp, new_value)

    async def _adopt(self) -> None:
        """Derive the store's current generation, off the event loop, if this process does
        not hold it yet (another worker loaded it)."""
        entry = await self._entry()
        if entry is None or (self._local is not None and self._local[0] >= entry[0]):
            return
        derived = await asyncio.to_thread(self._derive, entry[1])
        if self._local is None or self._local[0] < entry[0]:  # an update may have won
            self._local = (entry[0], derived)

    async def _periodic_step(self) -> float:
        """Refresh when due; returns the seconds until the next step."""
        stamp = await self._store.get(self._stamp_key)
        age = time.time() - float(stamp) if stamp is not None else None
        if age is not None and age < self.refresh_after:
            # Workers sharing a store each run this job: one that finds a generation
            # another worker loaded recently adopts it instead of loading the whole list
            # again (N workers would otherwise spend N times the upstream budget).
            await self._adopt()
            return self.refresh_after - age
        await self.refresh()
        return self.refresh_after

    async def run_periodic(self) -> None:
        """Background job: keep the value fresh so no request waits for a reload."""
        delay = 0.0
        while True:
            await asyncio.sleep(delay)
            try:
                delay = await self._periodic_step()
            except UpstreamError as exc:
                log.warning("refresh of %s failed (%s); retrying soon", self._key, exc.action)
                delay = min(30.0, self.refresh_after)
            except Exception:
                log.exception("refresh of %s crashed; retrying soon", self._key)
                delay = min(30.0, self.refresh_after)

    async def aclose(self) -> None:
        for task in (self._background, self._inflight):
            if task is not None and not task.done():
                task.cancel()
