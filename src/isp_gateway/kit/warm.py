"""What a whole list kept warm (resource.py) answers to and hands out: the refresh plan it
follows, the metrics that watch it, the snapshot a reader gets, and the periodic job that
keeps it fresh."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from isp_gateway.kit.errors import StoreUnavailable, UpstreamError

log = logging.getLogger("isp_gateway.cache")

D = TypeVar("D")

# A refresh starts at this fraction of a list's lifetime, unless its planner says otherwise.
DEFAULT_REFRESH_RATIO = 0.8


class Planner(Protocol):
    """The refresh plan a list follows (upstream/planner.py): its lifetime and refresh point
    from its measured size and the upstream budget."""

    def register(self, resource: str, lifetime: float, *, refresh_ratio: float = ...) -> None: ...
    def measured(self, resource: str, pages: int) -> None: ...
    def load_allowance(self, resource: str) -> float: ...
    def is_large(self, resource: str) -> bool: ...
    def lifetime(self, resource: str) -> float: ...
    def refresh_every(self, resource: str) -> float: ...


class Watched(Protocol):
    """A list as the metrics read it: its name and the load time of its copy."""

    @property
    def name(self) -> str: ...
    async def loaded_at(self) -> float | None: ...


class Watcher(Protocol):
    """What the metrics see of the lists (observability/metrics.py): each list once, and
    every answer served stale."""

    def watch_cache(self, resource: Watched) -> None: ...
    def stale(self, key: str) -> None: ...


@dataclass(frozen=True)
class Snapshot(Generic[D]):
    value: D
    loaded_at: float
    stale: bool


class Refreshed(Watched, Protocol):
    """A list as its periodic job drives it."""

    @property
    def refresh_after(self) -> float: ...
    async def adopt(self, loaded_at: float) -> None: ...
    async def refresh(self, replacing: float | None = None, started_after: float = 0.0) -> None: ...


async def periodic_step(resource: Refreshed) -> float:
    """Refresh when due; returns the seconds until the next step."""
    at = await resource.loaded_at()
    age = None if at is None else time.time() - at
    if at is not None and age is not None and age < resource.refresh_after:
        # Workers sharing a store each run this job: one that finds a generation another
        # worker loaded recently adopts it instead of loading the whole list again (N
        # workers would otherwise spend N times the upstream budget).
        await resource.adopt(at)
        return resource.refresh_after - age
    await resource.refresh(at)
    return resource.refresh_after


async def keep_fresh(resource: Refreshed) -> None:
    """Background job: keep the list fresh so no request waits for a reload."""
    delay = 0.0
    while True:
        await asyncio.sleep(delay)
        try:
            delay = await periodic_step(resource)
        except (UpstreamError, StoreUnavailable) as exc:
            # An outage of the upstream or the store: one line, not a traceback a time.
            log.warning("refresh of cache:%s failed (%s); retrying soon", resource.name, exc.action)
            delay = min(30.0, resource.refresh_after)
        except Exception:
            log.exception("refresh of cache:%s crashed; retrying soon", resource.name)
            delay = min(30.0, resource.refresh_after)
