"""In-memory store for a single process (the default deployment shape)."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from isp_gateway.kit.storage import LockTimeout, Rule, Series, rule_holds

# Expired entries are dropped lazily on access, plus a sweep every this many writes, so
# the dict cannot grow without bound under a stream of one-off keys.
_SWEEP_EVERY = 1000


class MemoryStore:
    def __init__(self) -> None:
        self._data: dict[str, tuple[Any, float | None]] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._writes = 0
        self._logs: dict[str, deque[tuple[int, str]]] = {}

    def _alive(self, key: str) -> tuple[Any, float | None] | None:
        item = self._data.get(key)
        if item is None:
            return None
        if item[1] is not None and item[1] <= time.monotonic():
            del self._data[key]
            return None
        return item

    def _put(self, key: str, value: Any, ttl: float | None) -> None:
        expires = time.monotonic() + ttl if ttl is not None else None
        self._data[key] = (value, expires)
        self._writes += 1
        if self._writes % _SWEEP_EVERY == 0:
            now = time.monotonic()
            for k in [k for k, (_, e) in self._data.items() if e is not None and e <= now]:
                del self._data[k]

    async def get(self, key: str) -> Any | None:
        item = self._alive(key)
        return None if item is None else item[0]

    async def get_many(self, keys: list[str]) -> list[Any | None]:
        return [None if (item := self._alive(key)) is None else item[0] for key in keys]

    async def set(self, key: str, value: Any, ttl: float | None = None) -> None:
        self._put(key, value, ttl)

    async def set_replicated(self, key: str, value: Any, ttl: float | None = None) -> None:
        self._put(key, value, ttl)  # one process: nothing to fail over to

    async def set_if_absent(self, key: str, value: Any, ttl: float | None = None) -> bool:
        if self._alive(key) is not None:
            return False
        self._put(key, value, ttl)
        return True

    async def delete(self, key: str) -> None:
        self._data.pop(key, None)

    async def lease(self, key: str, owner: str, ttl: float) -> bool:
        held = self._alive(key)
        if held is not None and held[0] != owner:
            return False
        if ttl <= 0:
            self._data.pop(key, None)
        else:
            self._put(key, owner, ttl)
        return True

    async def incr(self, key: str, amount: int = 1, ttl: float | None = None) -> int:
        return self._incr(key, amount, ttl)

    def _incr(self, key: str, amount: int, ttl: float | None) -> int:
        item = self._alive(key)
        if item is None:
            self._put(key, amount, ttl)
            return amount
        value = int(item[0]) + amount
        self._data[key] = (value, item[1])
        return value

    async def take_if(self, series: Sequence[Series], rule: Rule) -> tuple[bool, list[list[int]]]:
        # No await in here: atomic for every task of this process.
        values = [
            [0 if (item := self._alive(key)) is None else int(item[0]) for key in one.keys]
            for one in series
        ]
        taken = rule_holds([sum(counts) for counts in values], rule)
        if taken:
            for one in series:
                if one.take and one.keys:
                    self._incr(one.keys[-1], 1, one.ttl)
        return taken, values

    async def ttl(self, key: str) -> float | None:
        item = self._alive(key)
        if item is None or item[1] is None:
            return None
        return max(0.0, item[1] - time.monotonic())

    async def log_append(self, key: str, value: Any, max_len: int) -> None:
        log = self._logs.get(key)
        if log is None or log.maxlen != max_len:
            log = self._logs[key] = deque(log or (), maxlen=max_len)
        # Ids count up by one per log, so an entry's place follows from its id. Kept as JSON
        # text: a copy, as in Redis, and about a fifth of the memory of the dict (the audit
        # keeps 100,000 entries by default).
        entry_id = log[-1][0] + 1 if log else 1
        log.append((entry_id, json.dumps(value, separators=(",", ":"))))

    async def log_read(
        self, key: str, count: int, before: str | None = None
    ) -> list[tuple[str, Any]]:
        log = self._logs.get(key)
        if not log or count <= 0:
            return []
        # Entries newer than `before` are skipped by position, not looked at one by one.
        skip = 0 if before is None else max(0, log[-1][0] - int(before) + 1)
        return [
            (str(entry_id), json.loads(text))
            for entry_id, text in itertools.islice(reversed(log), skip, skip + count)
        ]

    @asynccontextmanager
    async def lock(
        self, name: str, *, timeout: float = 30.0, blocking_timeout: float | None = None
    ) -> AsyncIterator[None]:
        # In one process a holder cannot vanish without releasing, so `timeout` has no role.
        lock = self._locks.setdefault(name, asyncio.Lock())
        try:
            if blocking_timeout is None:
                await lock.acquire()
            else:
                await asyncio.wait_for(lock.acquire(), blocking_timeout)
        except TimeoutError:
            raise LockTimeout(name) from None
        try:
            yield
        finally:
            lock.release()
            if not lock.locked() and not getattr(lock, "_waiters", None):
                self._locks.pop(name, None)

    async def close(self) -> None:
        self._data.clear()
        self._logs.clear()
