"""Redis store: the same Protocol, shared by every worker and replica (REDIS_URL).

A Redis that does not answer surfaces as one error, `StoreUnavailable` (503
`store_unavailable`), raised here and nowhere else: callers never see redis-py's exceptions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.lock import Lock
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import LockError
from redis.exceptions import TimeoutError as RedisTimeoutError

from isp_gateway.errors import StoreUnavailable
from isp_gateway.store.base import LockTimeout

PREFIX = "ispgw:"
# REDIS_TIMEOUT_SECONDS' default: how long one command may wait for Redis.
DEFAULT_TIMEOUT_SECONDS = 2.0
# How often a lock held by another worker is tried again (redis-py's own default).
LOCK_POLL_SECONDS = 0.1


def _px(ttl: float | None) -> int | None:
    """Milliseconds for Redis. Redis refuses 0 ("invalid expire time"), so a ttl that rounds
    to nothing becomes 1 ms: expired at once, as in the memory store."""
    return None if ttl is None else max(1, int(ttl * 1000))


def _cancel_requests() -> int:
    task = asyncio.current_task()
    return 0 if task is None else task.cancelling()


@contextlib.contextmanager
def _answering() -> Iterator[None]:
    """Map a Redis that is down, unreachable or too slow to `StoreUnavailable`, and never let
    a cancellation go unnoticed.

    redis-py's asyncio client can complete a command during which the calling task was
    cancelled and return normally: the CancelledError is swallowed and the task runs on
    (measured: about 40 % of cancellations that land inside a GET or INCRBY under uvloop).
    A background page paused on the budget re-checks it in Redis, so at shutdown its
    cancellation was lost often enough; the page then waited for the budget again, its load
    outlived the lifespan's close, and the server's stop took tens of seconds. A task whose
    cancellation was requested during the command is therefore cancelled here."""
    requested = _cancel_requests()
    try:
        yield
    except (RedisConnectionError, RedisTimeoutError):
        # redis-py's message names host and port only; the URL (and its password) stays out.
        raise StoreUnavailable() from None
    if _cancel_requests() > requested:
        raise asyncio.CancelledError()


async def _release(lock: Lock, token: bytes) -> None:
    """Delete the lock if it still holds our token: it may have expired while held and be
    someone else's by now. Shielded: a request cancelled (again) while it releases leaves
    no lock behind to block its zone until it expires; the release goes on without it. A
    Redis gone meanwhile expires it by its timeout: the work done under it stands."""
    release = asyncio.ensure_future(lock.do_release(token))
    release.add_done_callback(_consume)
    with contextlib.suppress(LockError, RedisConnectionError, RedisTimeoutError):
        await asyncio.shield(release)


def _consume(task: asyncio.Future[None]) -> None:
    """A release's failure is expected (not ours, Redis away): read, never logged."""
    if not task.cancelled():
        task.exception()


class RedisStore:
    def __init__(self, url: str, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> None:
        self._redis: aioredis.Redis = aioredis.Redis.from_url(
            url,
            decode_responses=False,
            # A short blip is retried; an outage answers within about half a second
            # (redis-py's default, ten retries up to 1 s apart, held every request ~5 s).
            # Only a refused or dropped connection is retried: a Redis that is frozen (up
            # but not answering) costs one `timeout`, never four.
            retry=Retry(
                ExponentialWithJitterBackoff(base=0.01, cap=0.2),
                retries=3,
                supported_errors=(RedisConnectionError,),
            ),
            retry_on_timeout=False,
            # A frozen Redis answers nothing: without these a command waited for ever
            # (issue 17: no answer within 40 s). REDIS_TIMEOUT_SECONDS.
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
        )

    @staticmethod
    def _k(key: str) -> str:
        return PREFIX + key

    async def ping(self) -> None:
        await self._redis.ping()

    async def get(self, key: str) -> Any | None:
        with _answering():
            raw = await self._redis.get(self._k(key))
        return None if raw is None else json.loads(raw)

    async def get_many(self, keys: list[str]) -> list[Any | None]:
        if not keys:
            return []
        with _answering():
            raws = await self._redis.mget([self._k(key) for key in keys])
        return [None if raw is None else json.loads(raw) for raw in raws]

    async def set(self, key: str, value: Any, ttl: float | None = None) -> None:
        px = _px(ttl)
        with _answering():
            await self._redis.set(self._k(key), json.dumps(value, separators=(",", ":")), px=px)

    async def set_if_absent(self, key: str, value: Any, ttl: float | None = None) -> bool:
        px = _px(ttl)
        with _answering():
            done = await self._redis.set(
                self._k(key), json.dumps(value, separators=(",", ":")), px=px, nx=True
            )
        return bool(done)

    async def delete(self, key: str) -> None:
        with _answering():
            await self._redis.delete(self._k(key))

    async def incr(self, key: str, amount: int = 1, ttl: float | None = None) -> int:
        name = self._k(key)
        with _answering():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.incrby(name, amount)
                if ttl is not None:
                    # NX: the window's expiry is set once, when the counter is created.
                    pipe.pexpire(name, max(1, int(ttl * 1000)), nx=True)
                result = await pipe.execute()
        return int(result[0])

    async def ttl(self, key: str) -> float | None:
        with _answering():
            ms = await self._redis.pttl(self._k(key))
        return None if ms is None or ms < 0 else ms / 1000

    async def log_append(self, key: str, value: Any, max_len: int) -> None:
        # MAXLEN ~: Redis trims whole blocks of entries, cheaply, keeping at least max_len.
        payload = json.dumps(value, separators=(",", ":"))
        with _answering():
            await self._redis.xadd(self._k(key), {"v": payload}, maxlen=max_len, approximate=True)

    async def log_read(
        self, key: str, count: int, before: str | None = None
    ) -> list[tuple[str, Any]]:
        # "(" makes the upper bound exclusive (Redis 6.2+).
        upper = "+" if before is None else "(" + before
        with _answering():
            entries: Any = await self._redis.xrevrange(self._k(key), upper, "-", count=count)
        out: list[tuple[str, Any]] = []
        for entry_id, fields in entries or ():
            out.append((entry_id.decode(), json.loads(fields[b"v"])))
        return out

    @asynccontextmanager
    async def lock(
        self, name: str, *, timeout: float = 30.0, blocking_timeout: float | None = None
    ) -> AsyncIterator[None]:
        # `timeout` expires the lock if its holder dies, so one crashed worker cannot
        # block a zone forever.
        lock = self._redis.lock(
            self._k("lock:" + name), timeout=timeout, blocking_timeout=blocking_timeout
        )
        # Ours, known before the attempt: a cancelled attempt may have set the lock in Redis
        # without our learning it, and only the token can tell (and release) it.
        token = uuid.uuid4().hex.encode()
        # Polled here rather than by redis-py's blocking acquire, whose loop would go on
        # waiting after a cancellation lost in one of its attempts (see `_answering`).
        deadline = None if blocking_timeout is None else time.monotonic() + blocking_timeout
        try:
            while True:
                with _answering():
                    if await lock.acquire(blocking=False, token=token):
                        break
                if deadline is not None and time.monotonic() >= deadline:
                    raise LockTimeout(name)
                await asyncio.sleep(LOCK_POLL_SECONDS)
        except asyncio.CancelledError:
            await _release(lock, token)
            raise
        try:
            yield
        finally:
            await _release(lock, token)

    async def close(self) -> None:
        await self._redis.aclose()
