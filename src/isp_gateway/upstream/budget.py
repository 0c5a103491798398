"""The upstream's rate budget: about 100 calls a minute and 1000 an hour per key.

Counted in the store, so several workers sharing a Redis store share one budget. Each window
is counted in ten sub-buckets and a call is admitted against the sum of the last window and
a bucket: the upstream's own throttle is a sliding log (DRF), and plain fixed windows would
let twice the minute's budget through across a window edge, answered by a 429.

Interactive calls (a ticket, a ping, a lookup miss, a single-client confirmation) come first:
they may spend the whole window. Background work (whole-list refreshes) yields: it takes a
call only while the window keeps room for the interactive reserve
(`UPSTREAM_INTERACTIVE_RESERVE`, default 30 %) or, when interactive callers used more than
that lately, for as many as they used. A refused background call waits (its refresh pauses
and resumes where it was); it never takes an interactive caller's unit.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass

from isp_gateway.kit.callers import current_caller
from isp_gateway.kit.errors import UpstreamRateLimited
from isp_gateway.store import Store

DEFAULT_INTERACTIVE_RESERVE = 0.3
DEFAULT_CALLER_SHARE = 1.0  # no fair share unless configured (the app passes the setting)
BUCKETS = 10  # sub-buckets per window


@dataclass(frozen=True)
class Window:
    length: float  # seconds
    limit: int  # calls per window

    @property
    def bucket(self) -> float:
        return self.length / BUCKETS


class RateBudget:
    def __init__(
        self,
        store: Store,
        per_minute: int,
        per_hour: int,
        *,
        reserve: float = DEFAULT_INTERACTIVE_RESERVE,
        share: float = DEFAULT_CALLER_SHARE,
        minute: float = 60.0,
        hour: float = 3600.0,
    ) -> None:
        self._store = store
        self.windows = (Window(minute, per_minute), Window(hour, per_hour))
        self.reserve = reserve
        self.share = share

    def caller_share(self) -> int:
        """Calls of the minute window one end user may spend (at least one)."""
        minute = self.windows[0]
        return max(1, math.floor(minute.limit * self.share))

    def reserved(self, window: Window) -> int:
        """Calls of a window kept for interactive callers."""
        return min(window.limit, math.ceil(window.limit * self.reserve))

    def background_share(self, window: Window) -> int:
        """Calls of a window background work may spend when interactive demand is low."""
        return window.limit - self.reserved(window)

    @staticmethod
    def _key(window: Window, bucket: int, interactive: bool) -> str:
        return f"budget:{window.length:g}:{bucket}{':i' if interactive else ''}"

    async def _sums(self, window: Window, now_bucket: int) -> tuple[int, int]:
        """(all calls, interactive calls) in the current bucket and the window before it."""
        buckets = range(now_bucket - BUCKETS, now_bucket + 1)
        keys = [self._key(window, b, False) for b in buckets]
        keys += [self._key(window, b, True) for b in buckets]
        values = await self._store.get_many(keys)
        counts = [int(v) if v is not None else 0 for v in values]
        return sum(counts[: len(buckets)]), sum(counts[len(buckets) :])

    async def _try_share(self, end_user: str, now: float) -> tuple[str, float] | float:
        """Take one unit of `end_user`'s share of the minute: the key and ttl taken, or the
        seconds until the oldest of its calls leaves the window."""
        window = self.windows[0]
        bucket = int(now // window.bucket)
        ttl = window.length + 2 * window.bucket + 5
        key = f"budget:share:{window.length:g}:{bucket}:{end_user}"
        await self._store.incr(key, 1, ttl=ttl)
        buckets = range(bucket - BUCKETS, bucket + 1)
        values = await self._store.get_many(
            [f"budget:share:{window.length:g}:{b}:{end_user}" for b in buckets]
        )
        counts = [int(v) if v is not None else 0 for v in values]
        if sum(counts) <= self.caller_share():
            return key, ttl
        await self._store.incr(key, -1, ttl=ttl)
        oldest = next((b for b, c in zip(buckets, counts, strict=True) if c > 0), bucket)
        # Its oldest call leaves the sum (the window and the current bucket) then; at most
        # the minute itself, as a Retry-After for a minute budget reads.
        return min(window.length, max(0.01, (oldest + BUCKETS + 1) * window.bucket - now))

    async def _try(self, background: bool) -> float:
        """Take one call from every window; 0.0 on success, else seconds to wait."""
        now = time.time()
        taken: list[tuple[str, float]] = []
        caller = None if background or self.share >= 1 else current_caller()
        if caller is not None:
            share = await self._try_share(caller.end_user, now)
            if isinstance(share, float):
                return share
            taken.append(share)
        for window in self.windows:
            bucket = int(now // window.bucket)
            ttl = window.length + 2 * window.bucket + 5
            keys = [self._key(window, bucket, False)]
            if not background:
                keys.append(self._key(window, bucket, True))
            # Counted first, then checked: concurrent callers (other workers) each see the
            # others' units, so together they never exceed the limit.
            for key in keys:
                await self._store.incr(key, 1, ttl=ttl)
                taken.append((key, ttl))
            total, interactive = await self._sums(window, bucket)
            if background:
                cap = window.limit - max(self.reserved(window), interactive)
            else:
                cap = window.limit
            if total > cap:
                # Give back what this attempt took so a refused call costs nothing. With a
                # ttl, in case the counter expired meanwhile: a counter recreated without
                # one would stay in the store for good.
                for key, key_ttl in taken:
                    await self._store.incr(key, -1, ttl=key_ttl)
                return (bucket + 1) * window.bucket - now
        return 0.0

    async def remaining(self) -> dict[str, tuple[int, int]]:
        """Calls left in each current window and its limit, `minute` and `hour` (metrics)."""
        now = time.time()
        left: dict[str, tuple[int, int]] = {}
        for name, window in zip(("minute", "hour"), self.windows, strict=True):
            used, _ = await self._sums(window, int(now // window.bucket))
            left[name] = (max(0, window.limit - used), window.limit)
        return left

    async def acquire(self, *, background: bool = False, max_wait: float = 0.0) -> None:
        """Spend one upstream call. An interactive call raises UpstreamRateLimited at once
        when the budget is gone (a bot cannot wait a minute); background work waits."""
        deadline = time.monotonic() + max_wait
        while True:
            wait = await self._try(background)
            if wait <= 0:
                return
            if not background and time.monotonic() + wait > deadline:
                raise UpstreamRateLimited(max(1.0, wait))
            await asyncio.sleep(wait + 0.01)
