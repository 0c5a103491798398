"""Reads of a list kept warm (resource.py) for a caller that must see the upstream's list as
it is now, not the copy of the schedule: the zone cap, an outage flag past its age."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from isp_gateway.kit import deadline
from isp_gateway.kit.warm import Snapshot

if TYPE_CHECKING:
    from isp_gateway.kit.localcopy import LocalCopy

D = TypeVar("D")


class _Host(Protocol[D]):
    """What CachedResource (resource.py) reads with: its loader and derive, its own load and
    the shared copy."""

    _loader: Callable[[bool], Awaitable[Any]]
    _derive: Callable[[Any], D]
    _recent: asyncio.Task[tuple[float, Any]] | None
    _copy: LocalCopy[D]

    async def loaded_at(self) -> float | None: ...

    async def _load(
        self, background: bool, replacing: float | None = None, lock: str = "lock"
    ) -> tuple[float, Any]: ...

    async def _current(self) -> tuple[float, D] | None: ...

    async def _loaded(self, background: bool) -> tuple[float, D]: ...


class FreshReads(Generic[D]):
    """The fresh reads of CachedResource."""

    # This process's interactive load in flight, joined by the callers of `recent`.
    _recent: asyncio.Task[tuple[float, Any]] | None

    async def load_now(self: _Host[D]) -> Snapshot[D]:
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

    async def recent(self: _Host[D], max_age: float) -> Snapshot[D]:
        """The shared copy (with its patches) when it is at most `max_age` old; else one
        interactive load, once across workers: under a store lock of its own (never behind
        a background refresh paused for the budget or a 429), a copy another worker loaded
        meanwhile is taken instead, and the new copy replaces the shared one."""
        at = await self.loaded_at()
        if at is None or time.time() - at >= max_age:
            load = self._recent
            if load is None or load.done():
                load = asyncio.ensure_future(self._load(False, at, lock="lock-recent"))
                self._recent = load
            # shield: a client that disconnects must not cancel the load others wait for.
            loaded_at, value = await asyncio.shield(load)
            await self._copy.derived(loaded_at, value)
        current = await self._current()
        if current is None:  # evicted from the store meanwhile: load as any reader would
            loaded_at, derived = await self._loaded(background=False)
            return Snapshot(derived, loaded_at, False)
        return Snapshot(current[1], current[0], False)
