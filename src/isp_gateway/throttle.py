"""Failure throttles (logins, identity verification) kept in the store.

A key is locked once it gathers `max_failures` failures within `window` seconds; a success
clears it. Counting in the store makes the lock hold across workers with Redis.
"""

from __future__ import annotations

from isp_gateway.store import Store


class FailureThrottle:
    def __init__(self, store: Store, prefix: str, max_failures: int, window: int) -> None:
        self._store = store
        self._prefix = prefix
        self.max_failures = max_failures
        self.window = window

    def _key(self, key: str) -> str:
        return f"throttle:{self._prefix}:{key}"

    async def retry_after(self, key: str) -> int | None:
        """Seconds until `key` may try again, or None when it is not locked."""
        count = await self._store.get(self._key(key))
        if count is None or int(count) < self.max_failures:
            return None
        remaining = await self._store.ttl(self._key(key))
        return max(1, int(remaining or self.window))

    async def failure(self, key: str) -> None:
        await self._store.incr(self._key(key), 1, ttl=self.window)

    async def success(self, key: str) -> None:
        await self._store.delete(self._key(key))
