"""A whole upstream list kept warm through the store (cache.py says how): reading, loading
once across workers, refreshing ahead, and the periodic job. Single-item changes go through
the list's patch log (patches.py)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from isp_gateway.kit import deadline
from isp_gateway.kit.calls import counting_calls, reporting_progress
from isp_gateway.kit.errors import StoreUnavailable, UpstreamError
from isp_gateway.kit.fresh import FreshReads
from isp_gateway.kit.localcopy import LocalCopy
from isp_gateway.kit.patches import PatchLog, Stamp
from isp_gateway.kit.progress import FirstLoad, LoadProgress
from isp_gateway.kit.storage import Store
from isp_gateway.kit.trim import release_free_memory
from isp_gateway.kit.warm import DEFAULT_REFRESH_RATIO, Planner, Snapshot, Watcher, keep_fresh

log = logging.getLogger("isp_gateway.cache")

D = TypeVar("D")

# After the store failed to answer `fresh_local`, it serves the local copy without asking
# the store for this long.
STORE_AWAY_SECONDS = 1.0


class CachedResource(FreshReads[D]):
    def __init__(
        self,
        store: Store,
        key: str,
        loader: Callable[[bool], Awaitable[Any]],
        derive: Callable[[Any], D],
        *,
        ttl: float,
        stale_ttl: float,
        refresh_ratio: float = DEFAULT_REFRESH_RATIO,
        patch: Callable[[D, Any], D] | None = None,
        metrics: Watcher | None = None,
        planner: Planner | None = None,
        answers_loading: str | None = None,
    ) -> None:
        self.name = key
        self._store = store
        self._key = f"cache:{key}"
        self._log: PatchLog[D] = PatchLog(store, key, patch)
        self.first_load = FirstLoad(store, key, answers_loading)
        self._loader = loader  # called with background=True/False
        self._derive = derive
        self._ttl = ttl
        self.stale_ttl = stale_ttl
        self._refresh_ratio = refresh_ratio
        # With a planner, `ttl` is a lower bound and the lifetime follows from the list's
        # measured size and the upstream budget (see upstream/planner.py).
        self._planner = planner
        if planner is not None:
            planner.register(key, ttl, refresh_ratio=refresh_ratio)
        self._copy: LocalCopy[D] = LocalCopy(self._key, derive, self._log)
        self._inflight: asyncio.Task[tuple[float, Any]] | None = None
        self._inflight_started = 0.0  # time.time() when the load in flight began
        self._inflight_background = False  # whether that load spends the background budget
        self._recent: asyncio.Task[tuple[float, Any]] | None = None
        self._background: asyncio.Task[None] | None = None
        self._periodic: asyncio.Task[None] | None = None
        self._store_away_until = 0.0  # see fresh_local
        self.loads = 0  # upstream loads made by this process, for tests and metrics
        # Counts stale copies served; reads `loaded_at` for the age gauge when scraped.
        self._metrics = metrics
        if metrics is not None:
            metrics.watch_cache(self)

    @property
    def ttl(self) -> float:
        """Served as fresh up to this age; past it, `stale=True`."""
        return self._ttl if self._planner is None else self._planner.lifetime(self.name)

    @property
    def refresh_after(self) -> float:
        """A refresh starts at this age."""
        if self._planner is None:
            return self._ttl * self._refresh_ratio
        return self._planner.refresh_every(self.name)

    def _measured(self, pages: Any) -> None:
        if self._planner is not None and isinstance(pages, int):
            self._planner.measured(self.name, pages)

    def _lock_timeout(self) -> float:
        """How long a load may hold the store's lock: a large list paced by the budget
        takes minutes, and another worker must not start a second load meanwhile."""
        if self._planner is None:
            return 120.0
        return 120.0 + 2 * self._planner.load_allowance(self.name)

    # -- this process's view ---------------------------------------------------------

    @property
    def local(self) -> D | None:
        """The derived structure this process holds (whatever its age), for tests."""
        local = self._copy.held
        return None if local is None else local.derived

    @property
    def derives(self) -> int:
        """Full builds of the derived structure in this process."""
        return self._copy.derives

    @property
    def local_stamp(self) -> Stamp | None:
        local = self._copy.held
        return None if local is None else (local.at, local.rev)

    # -- store access ----------------------------------------------------------------

    async def _entry(self) -> tuple[float, Any] | None:
        entry = await self._store.get(self._key)
        if not isinstance(entry, dict) or "loaded_at" not in entry:
            return None
        # A worker that adopts a list another one loaded learns its size too.
        self._measured(entry.get("pages"))
        return float(entry["loaded_at"]), entry["value"]

    async def loaded_at(self) -> float | None:
        """Load time of the copy in the store (whichever worker loaded it); None when
        nothing is cached. One small store read."""
        stamp = await self._log.stamp()
        return None if stamp is None else stamp[0]

    def _served(self, loaded_at: float, derived: D) -> Snapshot[D]:
        age = time.time() - loaded_at
        if age >= self.refresh_after:
            self._refresh_soon(loaded_at)
        stale = age >= self.ttl
        if stale and self._metrics is not None:
            self._metrics.stale(self.name)
        return Snapshot(derived, loaded_at, stale)

    async def _current(self) -> tuple[float, D] | None:
        """(load time, derived) of the cached generation. The small stamp key is read first:
        when this process already holds that base, the (possibly large) value is not
        fetched again, which matters with Redis; newer revisions are applied from the log."""
        stamp = await self._log.stamp()
        local = self._copy.held
        if local is not None and stamp is not None and stamp[0] == local.at:
            if stamp[1] != local.rev:
                local = await self._copy.catch_up(stamp[1]) or local
            return local.at, local.derived
        if stamp is not None and stamp[0] is not None and self._copy.deriving(stamp[0]):
            # That base is being derived here already: join it rather than fetch the
            # (possibly large) value once more per request.
            await self._copy.derived(stamp[0], None)
        else:
            entry = await self._entry()
            if entry is None:
                return None
            await self._copy.derived(*entry)
        local = await self._copy.catch_up()
        assert local is not None
        return local.at, local.derived

    # -- loading ---------------------------------------------------------------------

    async def _load(
        self, background: bool, replacing: float | None = None, lock: str = "lock"
    ) -> tuple[float, Any]:
        """Load the list and publish it. `replacing` is the generation (load time) the
        caller found too old; without one, any generation older than this call is.
        `lock` names the store lock the load holds (see `recent`)."""
        requested_at = time.time()
        async with self._store.lock(f"{lock}:{self._key}", timeout=self._lock_timeout()):
            # Another worker may have loaded it while we waited for the lock. A refresh
            # that saw generation G is done when a newer one is there, even one loaded
            # just before this call: workers sharing a store wake together at G's age,
            # and the later one would otherwise load again while the first one was still
            # building and publishing.
            entry = await self._entry()
            if entry is not None and (
                entry[0] >= requested_at or (replacing is not None and entry[0] > replacing)
            ):
                return entry
            # Updates logged up to here were written upstream before this fetch starts,
            # so the fetched list includes them; later ones may be missing from it.
            since = await self._log.stamp() or (None, 0)
            first = entry is None
            if first:
                self.first_load.begin()
            try:
                with (
                    counting_calls() as calls,
                    reporting_progress(self.first_load.page_read if first else None),
                ):
                    value = await self._loader(self._spends_background(background))
            except Exception:
                if first:
                    await self.first_load.end()
                raise
            finally:
                progress = self.first_load.taken() if first else None
            self.loads += 1
            self._measured(calls.count)
            loaded_at = time.time()
            # Derive (build the index) off the event loop and before publishing, so no
            # request ever builds it inline after a refresh.
            derived = await asyncio.to_thread(self._copy.build, value)
            ttl = self.ttl + self.stale_ttl
            async with self._log.lock():
                stored = {"loaded_at": loaded_at, "value": value, "pages": calls.count}
                await self._store.set(self._key, stored, ttl=ttl)
                new_log = await self._log.start_base(loaded_at, since, ttl)
            self._copy.hold(loaded_at, derived, new_log)
            if first:
                await self.first_load.end(progress)
        # The store's copy was encoded (for Redis, the whole list as one JSON text and its
        # bytes) and freed: give the heap's free memory back, off the event loop.
        await asyncio.to_thread(release_free_memory)
        return loaded_at, value

    def _spends_background(self, background: bool) -> bool:
        """Whether a load spends the background budget: a refresh, and a large list's load
        whoever waits for it (it spends only the background share, never the interactive
        reserve)."""
        return background or (self._planner is not None and self._planner.is_large(self.name))

    async def _single_flight(
        self,
        background: bool,
        replacing: float | None = None,
        started_after: float = 0.0,
        first: bool = False,
    ) -> tuple[float, Any]:
        if (
            self._inflight is not None
            and not self._inflight.done()
            and self._inflight_started < started_after
        ):
            # A load that began before the caller looked may not hold what it looks for: it
            # is waited for, then a load of the caller's own follows.
            await deadline.bounded(self._inflight, background=self._inflight_background)
        if self._inflight is None or self._inflight.done():
            self._inflight_started = time.time()
            self._inflight_background = self._spends_background(background)
            self._inflight = asyncio.ensure_future(self._without_deadline(background, replacing))
        # Shielded: a client that disconnects must not cancel the load others wait for. A
        # request waits only while it has time left (a load may be paused for the budget,
        # a Retry-After or another worker's lock); the load goes on for the next caller. A
        # load held by the budget answers 503 upstream_rate_limited (deadline.bounded).
        if first:  # nothing cached: the first load, whose progress may answer instead
            return await self.first_load.awaited(self._inflight, self._inflight_background)
        return await deadline.bounded(self._inflight, background=self._inflight_background)

    async def _without_deadline(
        self, background: bool, replacing: float | None
    ) -> tuple[float, Any]:
        # A load outlives the request that started it: its own context has no deadline.
        deadline.clear()
        return await self._load(background, replacing)

    def _refresh_soon(self, replacing: float) -> None:
        if self._background is not None and not self._background.done():
            return

        async def run() -> None:
            deadline.clear()
            try:
                await self.refresh(replacing)
            except (UpstreamError, StoreUnavailable) as exc:
                log.warning("background refresh of %s failed: %s", self._key, exc.action)
            except Exception:
                log.exception("background refresh of %s crashed", self._key)

        self._background = asyncio.ensure_future(run())

    async def refresh(self, replacing: float | None = None, started_after: float = 0.0) -> None:
        """Load now (used by the periodic job and refresh-ahead), then derive. With
        `replacing`, a generation newer than that one, loaded by another worker, will do.
        With `started_after` (a miss: the item was not in the list at that time), a load in
        flight joins only if it began after it."""
        loaded_at, value = await self._single_flight(
            background=True, replacing=replacing, started_after=started_after
        )
        await self._copy.derived(loaded_at, value)
        await self._copy.catch_up()

    async def _loaded(self, background: bool) -> tuple[float, D]:
        loaded_at, value = await self._single_flight(background, first=True)
        await self._copy.derived(loaded_at, value)
        local = await self._copy.catch_up()
        assert local is not None
        return local.at, local.derived

    # -- reading ---------------------------------------------------------------------

    async def get(self) -> Snapshot[D]:
        current = await self._current()
        if current is None:
            loaded_at, derived = await self._loaded(background=False)
            return Snapshot(derived, loaded_at, False)
        return self._served(*current)

    async def fresh_local(self) -> D | None:
        """The derived value when this process holds the store's current base and revision
        and it is not yet due for a refresh; otherwise None, and the caller takes the
        regular path (which applies new revisions, refreshes, marks staleness and reloads
        as needed). One small store read; while the store is away, the local copy (still
        fresh) with none."""
        local = self._copy.held
        if local is None or time.time() - local.at >= self.refresh_after:
            return None
        if time.monotonic() < self._store_away_until:
            return local.derived
        try:
            stamp = await self._log.stamp()
        except StoreUnavailable:
            # The store is away (an outage, a Redis failover): this process's copy, still
            # fresh, answers instead of a 503 (it may miss a change another worker logged
            # just before). For a second the store is not asked again: each ask waits for
            # the store's retries or timeout.
            self._store_away_until = time.monotonic() + STORE_AWAY_SECONDS
            return local.derived
        if stamp is None or stamp[0] != local.at or stamp[1] != local.rev:
            return None
        return local.derived

    async def peek(self) -> Snapshot[D] | None:
        """The cached value if any, without ever calling the upstream."""
        current = await self._current()
        if current is None:
            return None
        return self._served(*current)

    # -- writing ---------------------------------------------------------------------

    async def update(self, item: Any) -> None:
        """Record one changed item (JSON-serialisable; after a successful write upstream):
        appended to the current base's patch log under a new revision, applied here with
        `patch`, and by every other process on its next read. The base value is not
        rewritten and the load time is kept, so the refresh schedule is unchanged.

        With nothing cached yet the item is still logged (base None): a first load in
        flight, whose fetch may predate the write, carries it into its new log."""
        if self._log.patch is None:
            raise TypeError(f"{self._key} has no patch callback; it cannot be updated")
        new_log = await self._log.append(item, self.ttl + self.stale_ttl)
        self._log.apply(self._copy.held, new_log)

    # -- the periodic job ------------------------------------------------------------

    async def adopt(self, loaded_at: float) -> None:
        """Derive the store's current base (loaded at `loaded_at`), off the event loop, if
        this process does not hold it yet (another worker loaded it), then apply its patch
        log."""
        local = self._copy.held
        if local is not None and local.at >= loaded_at:
            await self._copy.catch_up()
            return
        entry = await self._entry()
        if entry is not None:
            await self._copy.adopt(*entry)

    async def run_periodic(self) -> None:
        """Background job: keep the value fresh so no request waits for a reload."""
        await keep_fresh(self)

    def start(self) -> None:
        """Keep the value fresh in the background from now on (start-up does not wait)."""
        if self._periodic is None:
            self._periodic = asyncio.create_task(self.run_periodic())

    async def aclose(self) -> None:
        """Stop the background refresh and the loads in flight."""
        tasks = [
            t
            for t in (
                self._periodic,
                self._background,
                self._inflight,
                self._recent,
                self._copy.pending(),
            )
            if t and not t.done()
        ]
        for task in tasks:
            task.cancel()
        # Awaited (briefly), so a load's page requests end before the upstream client the
        # lifespan closes next.
        if tasks:
            await asyncio.wait(tasks, timeout=5)

    async def progress(self) -> LoadProgress | None:
        """The first load under way, this worker's or another's (kit/progress.py)."""
        return await self.first_load.progress()
