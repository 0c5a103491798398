"""The upstream's rate budget: about 100 calls a minute and 1000 an hour per key.

Fixed windows counted in the store, so several workers sharing a Redis store share one
budget. User requests may spend the whole window; background refreshes stop at a share of it
so that a refresh never starves a customer's lookup.
"""

from __future__ import annotations

import asyncio
import time

from isp_gateway.errors import UpstreamRateLimited
from isp_gateway.store import Store

BACKGROUND_SHARE = 0.8


class RateBudget:
    def __init__(self, store: Store, per_minute: int, per_hour: int) -> None:
        self._store = store
        self._windows = ((60, per_minute), (3600, per_hour))

    async def _try(self, background: bool) -> float:
        """Take one call from every window; 0.0 on success, else seconds to wait."""
        now = time.time()
        taken: list[tuple[str, int]] = []
        for length, limit in self._windows:
            window = int(now // length)
            key = f"budget:{length}:{window}"
            count = await self._store.incr(key, 1, ttl=length + 5)
            taken.append((key, length + 5))
            cap = int(limit * BACKGROUND_SHARE) if background else limit
            if count > cap:
                # Give back what this attempt took so a refused call costs nothing. With a
                # ttl, in case the window's counter expired meanwhile: a counter recreated
                # without one would stay in the store for good.
                for k, ttl in taken:
                    await self._store.incr(k, -1, ttl=ttl)
                return (window + 1) * length - now
        return 0.0

    async def remaining(self) -> dict[str, tuple[int, int]]:
        """Calls left in each current window and its limit, `minute` and `hour` (metrics)."""
        now = time.time()
        left: dict[str, tuple[int, int]] = {}
        for length, limit in self._windows:
            used = await self._store.get(f"budget:{length}:{int(now // length)}")
            name = "minute" if length == 60 else "hour"
            left[name] = (max(0, limit - int(used or 0)), limit)
        return left

    async def acquire(self, *, background: bool = False, max_wait: float = 0.0) -> None:
        """Spend one upstream call. A user request raises UpstreamRateLimited at once when
        the budget is gone (a bot cannot wait a minute); a background job waits."""
        deadline = time.monotonic() + max_wait
        while True:
            wait = await self._try(background)
            if wait <= 0:
                return
            if not background and time.monotonic() + wait > deadline:
                raise UpstreamRateLimited(wait)
            await asyncio.sleep(min(wait, 5.0) if background else wait)
