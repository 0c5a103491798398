"""Refresh-ahead caching of whole upstream lists (clients, plans) through the store.

- The loaded value (the base) lives in the store with its load time, so workers sharing a
  Redis store share one copy and one refresh.
- Fresh: served as is. Past `refresh_after`: served, and one background refresh starts.
- Past `ttl`: served with `stale=True` while a refresh runs, for up to `stale_ttl`
  (stale-if-error); only the very first load makes a request wait.
- Concurrent misses make one upstream load (in-process future + the store's lock).
- `derive` builds a per-process structure (an index) once per loaded base.
- Single-item changes (`update`) never rewrite the base: they go to a small patch log for
  that base, numbered by revision, and the small stamp key carries (base, revision). A
  process behind by a few revisions reads the log and applies the missing items with the
  resource's `patch` callback; it never rebuilds its structure for them.

Store keys (JSON): `cache:<name>` {"loaded_at", "value"}; `cache:<name>:at` the stamp
{"at": loaded_at, "rev": n}; `cache:<name>:patches` {"base": loaded_at | None, "items":
[{"rev": n, "item": ...}]}. The log and the stamp are written together under the lock
`cache:<name>:patches`, log first, so a reader that sees revision n finds item n in the log.
A new base starts a new log carrying the items written after its load began (its fetch may
have missed them); see `_load`.

A first load (nothing cached) reports its progress (issue 28): `cache:<name>:progress`
{"started", "read", "total"}, written after each page by the worker loading, read by the
others (and /ready); a line in the log at each tenth of a list of several pages. A request
waiting on it for a list that `answers_loading` is told 503 `loading` with a Retry-After
estimated from the progress, at once when the load will not end within its deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from isp_gateway.kit import deadline
from isp_gateway.kit.errors import (
    Loading,
    StoreUnavailable,
    UpstreamError,
    UpstreamRateLimited,
    UpstreamUnavailable,
)
from isp_gateway.kit.trim import release_free_memory
from isp_gateway.store import Store
from isp_gateway.upstream.gateway import counting_calls, reporting_progress
from isp_gateway.upstream.planner import DEFAULT_REFRESH_RATIO, RefreshPlanner

if TYPE_CHECKING:
    from isp_gateway.observability.metrics import Metrics

log = logging.getLogger("isp_gateway.cache")

D = TypeVar("D")

# After the store failed to answer `fresh_local`, it serves the local copy without asking
# the store for this long.
STORE_AWAY_SECONDS = 1.0

Stamp = tuple[float | None, int]  # (base load time or None when nothing is cached, revision)

# A first load's progress record outlives a page's wait (a budget pause) but not a worker
# that died loading.
PROGRESS_TTL_SECONDS = 120.0


@dataclass
class LoadProgress:
    """How far a first load has come: rows read of the total the upstream announced."""

    started: float  # time.time()
    read: int = 0
    total: int | None = None
    logged: int = -1  # the last tenth written to the log

    def label(self) -> str:
        """What /ready says: `loading 12000/20000`."""
        return f"loading {self.read}/{self.total}"

    def remaining(self, now: float | None = None) -> float | None:
        """Seconds the rest should take at the pace so far; None before a page is read."""
        if not self.total or self.read <= 0:
            return None
        elapsed = max(0.001, (time.time() if now is None else now) - self.started)
        return max(0.0, (self.total - self.read) * elapsed / self.read)

    def as_json(self) -> dict[str, Any]:
        return {"started": self.started, "read": self.read, "total": self.total}

    @classmethod
    def from_json(cls, raw: Any) -> LoadProgress | None:
        if not isinstance(raw, dict) or not isinstance(raw.get("total"), int):
            return None
        return cls(float(raw["started"]), int(raw["read"]), int(raw["total"]))


@dataclass(frozen=True, slots=True)
class Lists:
    """What every whole list kept warm shares: the store, the stale-if-error window, the
    metrics and the refresh planner. Services make their lists through it, so each list is
    counted, planned and kept the same way."""

    store: Store
    stale_ttl: float
    metrics: Metrics | None = None
    planner: RefreshPlanner | None = None

    def resource(
        self,
        key: str,
        loader: Callable[[bool], Awaitable[Any]],
        derive: Callable[[Any], D],
        *,
        ttl: float,
        stale_ttl: float | None = None,
        patch: Callable[[D, Any], D] | None = None,
        planned: bool = True,
        answers_loading: str | None = None,
    ) -> CachedResource[D]:
        """A list kept warm; `planned=False` for one whose refreshes are not planned (they
        are made on demand and rarely). `answers_loading` names the list (e.g. "client
        list") for the 503 `loading` a request waiting on its first load is told; None: it
        waits, as for any load, until its deadline."""
        return CachedResource(
            self.store,
            key,
            loader,
            derive,
            ttl=ttl,
            stale_ttl=self.stale_ttl if stale_ttl is None else stale_ttl,
            patch=patch,
            metrics=self.metrics,
            planner=self.planner if planned else None,
            answers_loading=answers_loading,
        )


@dataclass(frozen=True)
class Snapshot(Generic[D]):
    value: D
    loaded_at: float
    stale: bool


@dataclass
class _Local(Generic[D]):
    """This process's derived structure: built from base `at`, patched up to `rev`."""

    at: float
    rev: int
    derived: D


def _stamp(raw: Any) -> Stamp | None:
    if isinstance(raw, dict) and "at" in raw:
        return float(raw["at"]), int(raw.get("rev", 0))
    return None


def _log_items(raw: Any, base: float | None) -> list[dict[str, Any]] | None:
    """The items of a patch log when it belongs to `base`, else None."""
    if not isinstance(raw, dict) or raw.get("base") != base:
        return None
    items: list[dict[str, Any]] = raw.get("items") or []
    return items


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
        refresh_ratio: float = DEFAULT_REFRESH_RATIO,
        patch: Callable[[D, Any], D] | None = None,
        metrics: Metrics | None = None,
        planner: RefreshPlanner | None = None,
        answers_loading: str | None = None,
    ) -> None:
        self.name = key
        self._store = store
        self._key = f"cache:{key}"
        self._stamp_key = f"cache:{key}:at"
        self._log_key = f"cache:{key}:patches"
        self._progress_key = f"cache:{key}:progress"
        # This process's first load in flight (see LoadProgress), and what it is called in
        # the 503 `loading` of a request waiting on it (None: no such answer).
        self._progress: LoadProgress | None = None
        self._answers_loading = answers_loading
        self._loader = loader  # called with background=True/False
        self._derive = derive
        # `patch(derived, item)` applies one logged item to a derived structure (see update).
        self._patch = patch
        self._ttl = ttl
        self.stale_ttl = stale_ttl
        self._refresh_ratio = refresh_ratio
        # With a planner, `ttl` is a lower bound and the lifetime follows from the list's
        # measured size and the upstream budget (see upstream/planner.py).
        self._planner = planner
        if planner is not None:
            planner.register(key, ttl, refresh_ratio=refresh_ratio)
        self._local: _Local[D] | None = None
        self._inflight: asyncio.Task[tuple[float, Any]] | None = None
        self._inflight_started = 0.0  # time.time() when the load in flight began
        self._recent: asyncio.Task[tuple[float, Any]] | None = None
        self._background: asyncio.Task[None] | None = None
        self._periodic: asyncio.Task[None] | None = None
        self._deriving: asyncio.Future[D] | None = None
        self._deriving_at: float | None = None
        self._store_away_until = 0.0  # see fresh_local
        self.loads = 0  # upstream loads made by this process, for tests and metrics
        self.derives = 0  # full builds of the derived structure in this process
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
        local = self._local
        return None if local is None else local.derived

    @property
    def local_stamp(self) -> Stamp | None:
        local = self._local
        return None if local is None else (local.at, local.rev)

    def _build(self, value: Any) -> D:
        self.derives += 1
        return self._derive(value)

    def _apply(self, raw_log: Any) -> None:
        """Apply the log's items this process lacks, when the log is for its base. Synchronous
        (no await between reading the revision and applying), so concurrent catch-ups in one
        process never apply an item twice."""
        local = self._local
        if local is None or self._patch is None:
            return
        items = _log_items(raw_log, local.at)
        if items is None:
            return
        for entry in items:
            rev = int(entry["rev"])
            if rev > local.rev:
                local.derived = self._patch(local.derived, entry["item"])
                local.rev = rev

    async def _catch_up(self, target: int | None = None) -> _Local[D] | None:
        """Bring the local structure up to the logged revisions (one small store read)."""
        local = self._local
        if local is None or self._patch is None:
            return local
        raw = await self._store.get(self._log_key)
        self._apply(raw)
        lost = raw is None or (isinstance(raw, dict) and raw.get("base") == local.at)
        if target is not None and local is self._local and local.rev < target and lost:
            # The log lost items it should hold (evicted or expired): they cannot be
            # applied; the next load includes them. Do not re-read the log on every request.
            log.warning("patch log of %s is behind its stamp; waiting for the next load", self._key)
            local.rev = target
        return self._local

    # -- store access ----------------------------------------------------------------

    async def _entry(self) -> tuple[float, Any] | None:
        entry = await self._store.get(self._key)
        if not isinstance(entry, dict) or "loaded_at" not in entry:
            return None
        # A worker that adopts a list another one loaded learns its size too.
        self._measured(entry.get("pages"))
        return float(entry["loaded_at"]), entry["value"]

    async def _read_stamp(self) -> Stamp | None:
        return _stamp(await self._store.get(self._stamp_key))

    async def loaded_at(self) -> float | None:
        """Load time of the copy in the store (whichever worker loaded it); None when
        nothing is cached. One small store read."""
        stamp = await self._read_stamp()
        return None if stamp is None else stamp[0]

    def _served(self, loaded_at: float, derived: D) -> Snapshot[D]:
        age = time.time() - loaded_at
        if age >= self.refresh_after:
            self._refresh_soon(loaded_at)
        stale = age >= self.ttl
        if stale and self._metrics is not None:
            self._metrics.stale(self.name)
        return Snapshot(derived, loaded_at, stale)

    def _patch_lock(self) -> AbstractAsyncContextManager[None]:
        return self._store.lock(f"lock:{self._log_key}", timeout=30)

    async def _current(self) -> tuple[float, D] | None:
        """(load time, derived) of the cached generation. The small stamp key is read first:
        when this process already holds that base, the (possibly large) value is not
        fetched again, which matters with Redis; newer revisions are applied from the log."""
        stamp = await self._read_stamp()
        local = self._local
        if local is not None and stamp is not None and stamp[0] == local.at:
            if stamp[1] != local.rev:
                local = await self._catch_up(stamp[1]) or local
            return local.at, local.derived
        deriving_at = self._deriving_at
        if (
            stamp is not None
            and self._deriving is not None
            and deriving_at is not None
            and deriving_at == stamp[0]
        ):
            # That base is being derived here already: join it rather than fetch the
            # (possibly large) value once more per request.
            await self._derived(deriving_at, None)
        else:
            entry = await self._entry()
            if entry is None:
                return None
            await self._derived(*entry)
        local = await self._catch_up()
        assert local is not None
        return local.at, local.derived

    async def _derived(self, loaded_at: float, value: Any) -> D:
        """This process's structure for the base loaded at `loaded_at`, built off the event
        loop (an index of 200,000 clients takes seconds) and once however many requests
        ask for it at the same time."""
        local = self._local
        if local is not None and local.at == loaded_at:
            return local.derived
        task = self._deriving
        if task is None or self._deriving_at != loaded_at:
            self._deriving_at = loaded_at
            task = self._deriving = asyncio.ensure_future(asyncio.to_thread(self._build, value))
        try:
            derived = await asyncio.shield(task)
        finally:
            if task.done() and self._deriving is task:
                self._deriving = None
        local = self._local
        if local is None or local.at != loaded_at:
            self._local = local = _Local(loaded_at, 0, derived)
        return local.derived

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
            since = await self._read_stamp() or (None, 0)
            # A large list's load is background work whoever waits for it: it spends only
            # the background share, never the interactive reserve.
            large = self._planner is not None and self._planner.is_large(self.name)
            first = entry is None
            if first:
                self._progress = LoadProgress(time.time())
            try:
                with (
                    counting_calls() as calls,
                    reporting_progress(self._page_read if first else None),
                ):
                    value = await self._loader(background or large)
            except Exception:
                if first:
                    await self._end_progress()
                raise
            finally:
                progress, self._progress = self._progress, None
            self.loads += 1
            self._measured(calls.count)
            loaded_at = time.time()
            # Derive (build the index) off the event loop and before publishing, so no
            # request ever builds it inline after a refresh.
            derived = await asyncio.to_thread(self._build, value)
            ttl = self.ttl + self.stale_ttl
            async with self._patch_lock():
                carried = self._carry(await self._store.get(self._log_key), since)
                new_log = {"base": loaded_at, "items": carried}
                stored = {"loaded_at": loaded_at, "value": value, "pages": calls.count}
                await self._store.set(self._key, stored, ttl=ttl)
                await self._store.set(self._log_key, new_log, ttl=ttl)
                await self._store.set(
                    self._stamp_key, {"at": loaded_at, "rev": len(carried)}, ttl=ttl
                )
            self._local = _Local(loaded_at, 0, derived)
            self._apply(new_log)
            if first:
                await self._end_progress(progress)
        # The store's copy was encoded (for Redis, the whole list as one JSON text and its
        # bytes) and freed: give the heap's free memory back, off the event loop.
        await asyncio.to_thread(release_free_memory)
        return loaded_at, value

    # -- a first load's progress -------------------------------------------------------

    async def _page_read(self, rows: int, total: int | None) -> None:
        """A page of the first load arrived: count it, log each tenth of a list of several
        pages, and publish the progress for the other workers (best effort)."""
        progress = self._progress
        if progress is None:
            return
        progress.read += rows
        if total is not None:
            progress.total = (progress.total or 0) + total
        if not progress.total or (progress.total <= progress.read and progress.logged < 0):
            return  # one page was the whole list: nothing to show
        tenth = progress.read * 10 // progress.total
        if progress.logged < tenth < 10:  # the end has a line of its own (_end_progress)
            progress.logged = tenth
            log.info("%s: loading %d/%d", self.name, progress.read, progress.total)
        with contextlib.suppress(StoreUnavailable):
            await self._store.set(self._progress_key, progress.as_json(), ttl=PROGRESS_TTL_SECONDS)

    async def _end_progress(self, progress: LoadProgress | None = None) -> None:
        """The first load is over (published, or failed): no worker reports it any longer."""
        if progress is not None and progress.logged >= 0:
            log.info(
                "%s: loaded %d in %.1f s", self.name, progress.read, time.time() - progress.started
            )
        with contextlib.suppress(StoreUnavailable):
            await self._store.delete(self._progress_key)

    async def progress(self) -> LoadProgress | None:
        """The first load under way, this worker's or another's (through the store), once
        its first page has told the total; None when there is none."""
        local = self._progress
        if local is not None and local.total is not None:
            return local
        return LoadProgress.from_json(await self._store.get(self._progress_key))

    async def _awaiting_first_load(
        self, task: asyncio.Future[tuple[float, Any]]
    ) -> tuple[float, Any]:
        """The first load `task`, waited for like `deadline.bounded`, except that for a list
        that `answers_loading`, a request is told 503 `loading` (Retry-After from the
        progress) as soon as the load, at its pace so far, will not end within the request's
        deadline, and when the deadline comes: never a 502 for a backend that answers."""
        current = deadline.current()
        if current is None or self._answers_loading is None:
            return await deadline.bounded(task)
        while True:
            left = current.left()
            await asyncio.wait({task}, timeout=max(0.0, min(left, deadline.POLL_SECONDS)))
            if task.done():
                return task.result()
            try:
                progress = await self.progress()
            except StoreUnavailable:
                progress = None
            left = current.left()
            if progress is not None:
                remaining = progress.remaining()
                if remaining is None or remaining > left or left <= 0:
                    raise self._loading(progress, remaining)
            gateway = current.gateway
            wait = 0.0 if gateway is None else gateway.rate_limited_for()
            if wait > max(0.0, left):
                raise UpstreamRateLimited(wait)
            if left <= 0:
                raise UpstreamUnavailable()

    def _loading(self, progress: LoadProgress, remaining: float | None) -> Loading:
        assert self._answers_loading is not None and progress.total is not None
        retry = max(1, math.ceil(remaining if remaining is not None else 1.0))
        return Loading(self._answers_loading, progress.read, progress.total, retry)

    @staticmethod
    def _carry(raw_log: Any, since: Stamp) -> list[dict[str, Any]]:
        """The items of the current log a load that started at `since` may have missed,
        renumbered for the new base: those after `since`, or all of a log for another base
        (re-applying an item the list already holds changes nothing)."""
        if not isinstance(raw_log, dict):
            return []
        items: list[dict[str, Any]] = raw_log.get("items") or []
        if raw_log.get("base") == since[0]:
            items = [i for i in items if int(i["rev"]) > since[1]]
        return [{"rev": n, "item": i["item"]} for n, i in enumerate(items, start=1)]

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
            await deadline.bounded(self._inflight)
        if self._inflight is None or self._inflight.done():
            self._inflight_started = time.time()
            self._inflight = asyncio.ensure_future(self._without_deadline(background, replacing))
        # Shielded: a client that disconnects must not cancel the load others wait for. A
        # request waits only while it has time left (a load may be paused for the budget,
        # a Retry-After or another worker's lock); the load goes on for the next caller.
        if first:  # nothing cached: the first load, whose progress may answer instead
            return await self._awaiting_first_load(self._inflight)
        return await deadline.bounded(self._inflight)

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
        await self._derived(loaded_at, value)
        await self._catch_up()

    async def load_now(self) -> Snapshot[D]:
        """The upstream's current list, read now as interactive work, for a caller that
        must see it (the zone cap, an outage flag past its age). It never joins a load in
        flight: a background refresh may be paused for the budget or a 429, and an
        interactive caller must not wait behind it. The copy is this caller's; the shared
        one is refreshed by its own schedule."""
        # The caller's own read: bounded by its deadline (a page that hangs, a list too long
        # to read in time), and cancelled with it.
        task = asyncio.ensure_future(self._loader(False))
        try:
            value = await deadline.bounded(task)
        finally:
            if not task.done():
                task.cancel()
        loaded_at = time.time()
        derived = await asyncio.to_thread(self._derive, value)
        return Snapshot(derived, loaded_at, False)

    async def recent(self, max_age: float) -> Snapshot[D]:
        """The shared copy (with its patches) when it is at most `max_age` old; else one
        interactive load, once across workers: under a store lock of its own (never behind
        a background refresh paused for the budget or a 429), a copy another worker loaded
        meanwhile is taken instead, and the new copy replaces the shared one."""
        at = await self.loaded_at()
        if at is None or time.time() - at >= max_age:
            if self._recent is None or self._recent.done():
                self._recent = asyncio.ensure_future(self._load(False, at, lock="lock-recent"))
            # shield: a client that disconnects must not cancel the load others wait for.
            loaded_at, value = await asyncio.shield(self._recent)
            await self._derived(loaded_at, value)
        current = await self._current()
        if current is None:  # evicted from the store meanwhile: load as any reader would
            loaded_at, derived = await self._loaded(background=False)
            return Snapshot(derived, loaded_at, False)
        return Snapshot(current[1], current[0], False)

    async def _loaded(self, background: bool) -> tuple[float, D]:
        loaded_at, value = await self._single_flight(background, first=True)
        await self._derived(loaded_at, value)
        local = await self._catch_up()
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
        local = self._local
        if local is None or time.time() - local.at >= self.refresh_after:
            return None
        if time.monotonic() < self._store_away_until:
            return local.derived
        try:
            stamp = _stamp(await self._store.get(self._stamp_key))
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
        if self._patch is None:
            raise TypeError(f"{self._key} has no patch callback; it cannot be updated")
        async with self._patch_lock():
            stamp = await self._read_stamp()
            base, rev = stamp if stamp is not None else (None, 0)
            items = _log_items(await self._store.get(self._log_key), base) or []
            if items:
                rev = max(rev, int(items[-1]["rev"]))
            new_log = {"base": base, "items": [*items, {"rev": rev + 1, "item": item}]}
            if base is None:
                ttl = self.ttl + self.stale_ttl
            else:
                ttl = max(1.0, self.ttl + self.stale_ttl - (time.time() - base))
            await self._store.set(self._log_key, new_log, ttl=ttl)
            if base is not None:
                await self._store.set(self._stamp_key, {"at": base, "rev": rev + 1}, ttl=ttl)
        self._apply(new_log)

    # -- the periodic job ------------------------------------------------------------

    async def _adopt(self, stamp: Stamp) -> None:
        """Derive the store's current base, off the event loop, if this process does not
        hold it yet (another worker loaded it), then apply its patch log."""
        local = self._local
        if local is not None and stamp[0] is not None and local.at >= stamp[0]:
            await self._catch_up()
            return
        entry = await self._entry()
        if entry is None or (self._local is not None and self._local.at >= entry[0]):
            return
        derived = await asyncio.to_thread(self._build, entry[1])
        if self._local is None or self._local.at < entry[0]:  # a load here may have won
            self._local = _Local(entry[0], 0, derived)
            await self._catch_up()

    async def _periodic_step(self) -> float:
        """Refresh when due; returns the seconds until the next step."""
        stamp = await self._read_stamp()
        age = time.time() - stamp[0] if stamp is not None and stamp[0] is not None else None
        if stamp is not None and age is not None and age < self.refresh_after:
            # Workers sharing a store each run this job: one that finds a generation
            # another worker loaded recently adopts it instead of loading the whole list
            # again (N workers would otherwise spend N times the upstream budget).
            await self._adopt(stamp)
            return self.refresh_after - age
        await self.refresh(None if stamp is None else stamp[0])
        return self.refresh_after

    async def run_periodic(self) -> None:
        """Background job: keep the value fresh so no request waits for a reload."""
        delay = 0.0
        while True:
            await asyncio.sleep(delay)
            try:
                delay = await self._periodic_step()
            except (UpstreamError, StoreUnavailable) as exc:
                # An outage of the upstream or the store: one line, not a traceback a time.
                log.warning("refresh of %s failed (%s); retrying soon", self._key, exc.action)
                delay = min(30.0, self.refresh_after)
            except Exception:
                log.exception("refresh of %s crashed; retrying soon", self._key)
                delay = min(30.0, self.refresh_after)

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
                self._deriving,
            )
            if t and not t.done()
        ]
        for task in tasks:
            task.cancel()
        # Awaited (briefly), so a load's page requests end before the upstream client the
        # lifespan closes next.
        if tasks:
            await asyncio.wait(tasks, timeout=5)
