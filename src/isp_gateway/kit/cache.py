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

Store keys (JSON): `cache:<name>` {"loaded_at", "value"}, and the patch log's (patches.py).
The list itself is `CachedResource` (resource.py); `Lists` makes each one the same way.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from isp_gateway.kit.resource import CachedResource
from isp_gateway.kit.storage import Store
from isp_gateway.kit.warm import DEFAULT_REFRESH_RATIO, Planner, Snapshot, Watcher

# What other modules import from here.
__all__ = [
    "DEFAULT_REFRESH_RATIO",
    "CachedResource",
    "Lists",
    "Planner",
    "Snapshot",
    "Watcher",
]

D = TypeVar("D")


@dataclass(frozen=True, slots=True)
class Lists:
    """What every whole list kept warm shares: the store, the stale-if-error window, the
    metrics and the refresh planner. Services make their lists through it, so each list is
    counted, planned and kept the same way."""

    store: Store
    stale_ttl: float
    metrics: Watcher | None = None
    planner: Planner | None = None

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
        are made on demand and rarely). `answers_loading` names the list (its variant of
        `loading` in kit/messages, e.g. "clients") for the 503 `loading` a request waiting
        on its first load is told (kit/progress.py); None: it waits, as for any load, until
        its deadline."""
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
