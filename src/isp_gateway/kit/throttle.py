"""Failure throttles (logins, identity verification) kept in the store.

A key is locked once it gathers `max_failures` failures within `window` seconds; a success
clears it. Counting in the store makes the lock hold across workers with Redis.

`reserve` counts an attempt before it is checked, in one atomic increment: a caller firing
many attempts in parallel cannot slip more than `max_failures` checks past the lock while
the first ones are still being checked (`retry_after` + `failure` leave that window open).
"""

from __future__ import annotations

from isp_gateway.kit.storage import Store


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

    async def remaining(self, key: str) -> int:
        """Attempts `key` may still make before it is locked."""
        count = await self._store.get(self._key(key))
        return max(0, self.max_failures - int(count or 0))

    async def reserve(self, key: str) -> int | None:
        """Count one attempt now; None when it may go ahead, else seconds to wait. An
        attempt that goes ahead stays counted as a failure until `success` clears the key."""
        return (await self.reserve_count(key))[1]

    async def reserve_count(self, key: str) -> tuple[int, int | None]:
        """`reserve`, with the attempt's place in the count: the attempt whose place is
        `max_failures` is the one that locks the key when it fails (to log the lock once)."""
        count = await self._store.incr(self._key(key), 1, ttl=self.window)
        if count <= self.max_failures:
            return count, None
        remaining = await self._store.ttl(self._key(key))
        return count, max(1, int(remaining or self.window))

    async def release(self, key: str) -> None:
        """Give back a reservation for an attempt that was not made after all."""
        await self._store.incr(self._key(key), -1, ttl=self.window)

    async def failure(self, key: str) -> None:
        await self._store.incr(self._key(key), 1, ttl=self.window)

    async def success(self, key: str) -> None:
        await self._store.delete(self._key(key))
