"""A first load's progress (issue 28: at 20,000 clients the first load showed nothing but
`clients: not_loaded` for over a minute, and a search then waited 10 s and answered 502).

A list's first load (nothing cached) counts the rows of each page it reads (kit/calls.py's
`reporting_progress`), writes a line to the log at each tenth of a list of several pages,
and publishes `cache:<name>:progress` {"started", "read", "total"} for the other workers and
`/ready` (`loading 12000/20000`). A request waiting on the first load of a list that
`answers_loading` is told 503 `loading`, with a Retry-After estimated from the pace so far,
at once when the load will not end within its deadline: never a 502 for a backend that
answers, only slowly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from dataclasses import dataclass
from typing import Any, TypeVar

from isp_gateway.kit import deadline
from isp_gateway.kit.errors import (
    Loading,
    StoreUnavailable,
    UpstreamRateLimited,
    UpstreamUnavailable,
)
from isp_gateway.kit.storage import Store

log = logging.getLogger("isp_gateway.cache")

T = TypeVar("T")

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


class FirstLoad:
    """The first load of one list, as this worker sees it."""

    def __init__(self, store: Store, name: str, answers_loading: str | None) -> None:
        self._store = store
        self.name = name
        self._key = f"cache:{name}:progress"
        # What the list is called in the 503 `loading` (None: a request waits, as for any
        # load, until its deadline).
        self._answers_loading = answers_loading
        self._progress: LoadProgress | None = None  # this worker's first load in flight

    def begin(self) -> None:
        self._progress = LoadProgress(time.time())

    def taken(self) -> LoadProgress | None:
        """The progress of this worker's load, which is over (published or failed)."""
        progress, self._progress = self._progress, None
        return progress

    async def page_read(self, rows: int, total: int | None) -> None:
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
        if progress.logged < tenth < 10:  # the end has a line of its own (`end`)
            progress.logged = tenth
            log.info("%s: loading %d/%d", self.name, progress.read, progress.total)
        with contextlib.suppress(StoreUnavailable):
            await self._store.set(self._key, progress.as_json(), ttl=PROGRESS_TTL_SECONDS)

    async def end(self, progress: LoadProgress | None = None) -> None:
        """The first load is over (published, or failed): no worker reports it any longer."""
        if progress is not None and progress.logged >= 0:
            log.info(
                "%s: loaded %d in %.1f s", self.name, progress.read, time.time() - progress.started
            )
        with contextlib.suppress(StoreUnavailable):
            await self._store.delete(self._key)

    async def progress(self) -> LoadProgress | None:
        """The first load under way, this worker's or another's (through the store), once
        its first page has told the total; None when there is none."""
        local = self._progress
        if local is not None and local.total is not None:
            return local
        return LoadProgress.from_json(await self._store.get(self._key))

    async def awaited(self, task: asyncio.Future[T], background: bool = False) -> T:
        """The first load `task`, waited for like `deadline.bounded`, except that for a list
        that `answers_loading`, a request is told 503 `loading` (Retry-After from the
        progress) as soon as the load, at its pace so far, will not end within the request's
        deadline, and when the deadline comes: never a 502 for a backend that answers."""
        current = deadline.current()
        if current is None or self._answers_loading is None:
            return await deadline.bounded(task, background=background)
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
