"""At most N distinct values per owner in any sliding window, across workers (CALLERS.md 6:
the distinct services one caller may resolve in an hour).

The owner holds N slots in the store, each a key that lives `window` seconds from the moment
a value took it. A value already in a live slot is free; a new one takes a free slot with
`set_if_absent` (two workers racing for one slot: one wins, the other takes the next). So
the count is exact over any window of `window` seconds, not per fixed hour (which would let
2N through around the hour's turn), at one read of the N slots and one write per new value.
"""

from __future__ import annotations

import math
import time
from typing import Any

from isp_gateway.kit.storage import Store


class DistinctQuota:
    def __init__(self, store: Store, prefix: str, limit: int, window: int) -> None:
        self._store = store
        self._prefix = prefix
        self.limit = limit
        self.window = window

    def _slots(self, owner: str) -> list[str]:
        return [f"quota:{self._prefix}:{owner}:{n}" for n in range(self.limit)]

    async def take(self, owner: str, value: str | int) -> int | None:
        """Count `value` for `owner`: None when it may go ahead (already counted within the
        window, or a slot was free), else the seconds until the oldest slot frees."""
        slots = self._slots(owner)
        held: list[Any] = await self._store.get_many(slots)
        wanted = str(value)
        if any(isinstance(slot, dict) and slot.get("v") == wanted for slot in held):
            return None
        now = time.time()
        for key, slot in zip(slots, held, strict=True):
            if slot is None and await self._store.set_if_absent(
                key, {"v": wanted, "t": now}, ttl=self.window
            ):
                return None
        taken = [float(slot["t"]) for slot in held if isinstance(slot, dict) and "t" in slot]
        oldest = min(taken, default=now)
        return max(1, math.ceil(oldest + self.window - now))
