"""Redis store: the same Protocol, shared by every worker and replica (REDIS_URL, or the
master Redis Sentinel names: REDIS_SENTINELS).

A Redis that does not answer surfaces as one error, `StoreUnavailable` (503
`store_unavailable`), raised here and nowhere else: callers never see redis-py's exceptions.

Under Sentinel, redis-py's connection pool asks the sentinels for the master's address on
every new connection, and drops a connection whose server answers READONLY (a demoted master
still connected): the next attempt finds the new master, so a failover needs no restart.
Until the sentinels have promoted a replica, commands fail as for a Redis that is away.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.lock import Lock
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import LockError, ReadOnlyError
from redis.exceptions import TimeoutError as RedisTimeoutError

from isp_gateway.kit import deadline, tasks
from isp_gateway.kit.errors import StoreUnavailable
from isp_gateway.kit.storage import LockTimeout, Rule, Series
from isp_gateway.store.health import Health, address, redacted_url
from isp_gateway.store.scripts import LEASE, TAKE_IF
from isp_gateway.store.sentinel import FollowingConnection, SentinelMaster, Sentinels

# What other modules import from here.
__all__ = ["DEFAULT_TIMEOUT_SECONDS", "RedisStore", "SentinelMaster"]

log = logging.getLogger("isp_gateway.store")

T = TypeVar("T")

PREFIX = "ispgw:"
# REDIS_TIMEOUT_SECONDS' default: how long one command may wait for Redis.
DEFAULT_TIMEOUT_SECONDS = 2.0
# How often a lock held by another worker is tried again (redis-py's own default).
LOCK_POLL_SECONDS = 0.1
# How often locks left behind by a lost connection are tried again (`_release_when_back`),
# and how many are remembered at most (the others expire by their timeout).
RELEASE_RETRY_SECONDS = 0.25
MAX_UNRELEASED = 1000
# `set_replicated` waits at most this long (and half of REDIS_TIMEOUT_SECONDS) for a replica;
# when none confirmed, it stops waiting for one for NO_REPLICA_SECONDS (a master left alone
# after a failover must not cost every write the wait).
REPLICA_WAIT_SECONDS = 0.5
NO_REPLICA_SECONDS = 10.0
# Errors that mean "the store is away" (READONLY: a master demoted under us, outside Sentinel).
_AWAY = (RedisConnectionError, RedisTimeoutError, ReadOnlyError)


def _px(ttl: float | None) -> int | None:
    """Milliseconds for Redis. Redis refuses 0 ("invalid expire time"), so a ttl that rounds
    to nothing becomes 1 ms: expired at once, as in the memory store."""
    return None if ttl is None else max(1, int(ttl * 1000))


def _cancel_requests() -> int:
    task = asyncio.current_task()
    return 0 if task is None else task.cancelling()


@contextlib.contextmanager
def _answering(health: Health) -> Iterator[None]:
    """Map a Redis that is down, unreachable or too slow to `StoreUnavailable` (`health`
    logs the store's loss and return, once each), and never let a cancellation go unnoticed.

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
    except _AWAY as exc:
        health.lost(exc)
        # redis-py's message names host and port only; the URL (and its password) stays out.
        raise StoreUnavailable() from None
    if health.lost_since is not None:
        health.answered()
    if _cancel_requests() > requested:
        raise asyncio.CancelledError()


def one_try() -> Retry:
    """Ask once (a sentinel, `check-config --probe`): redis-py's default waits seconds."""
    return Retry(NoBackoff(), retries=0)


class RedisStore:
    """The store on one Redis (`url`) or on the master Sentinel names (`sentinel`)."""

    def __init__(
        self,
        url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        *,
        sentinel: SentinelMaster | None = None,
    ) -> None:
        options: dict[str, Any] = {
            "decode_responses": False,
            # A short blip is retried; an outage answers within about half a second
            # (redis-py's default, ten retries up to 1 s apart, held every request ~5 s).
            # Only a refused or dropped connection is retried: a Redis that is frozen (up
            # but not answering) costs one `timeout`, never four. Under Sentinel each retry
            # asks the sentinels for the master again.
            "retry": Retry(
                ExponentialWithJitterBackoff(base=0.01, cap=0.2),
                retries=3,
                supported_errors=(RedisConnectionError,),
            ),
            # A frozen Redis answers nothing: without these a command waited for ever
            # (issue 17: no answer within 40 s). REDIS_TIMEOUT_SECONDS.
            "socket_timeout": timeout,
            "socket_connect_timeout": timeout,
        }
        self._sentinel: Sentinels | None = None
        self._redis: aioredis.Redis
        if sentinel is not None:
            self._sentinel = Sentinels(
                list(sentinel.sentinels),
                # Each sentinel asked once per discovery: one that is down is skipped at once.
                sentinel_kwargs={
                    "socket_timeout": timeout,
                    "socket_connect_timeout": timeout,
                    "password": sentinel.sentinel_password,
                    "retry": one_try(),
                },
            )
            self._redis = self._sentinel.master_for(
                sentinel.name,
                password=sentinel.password,
                connection_class=FollowingConnection,
                **options,
            )
        elif url is not None:
            self._redis = aioredis.Redis.from_url(url, retry_on_timeout=False, **options)
        else:
            raise ValueError("RedisStore needs a URL or a SentinelMaster")
        self._take_if = self._redis.register_script(TAKE_IF)
        self._timeout = timeout
        self._where = None if url is None else f"Redis {redacted_url(url)}"
        self._master = sentinel
        self._health = Health(self.describe)
        self._wait_ms = int(min(REPLICA_WAIT_SECONDS, timeout / 2) * 1000)
        self._no_replica_until = 0.0
        self._unreleased: dict[bytes, tuple[Lock, float]] = {}
        self._releaser: asyncio.Task[None] | None = None
        self._closed = False

    @staticmethod
    def _k(key: str) -> str:
        return PREFIX + key

    def describe(self) -> str:
        """Which Redis, for the logs: its URL without the password, or the master's name and
        address through Sentinel (the address as last discovered) and the sentinels."""
        if self._where is not None:
            return self._where
        assert self._master is not None and self._sentinel is not None
        found = self._sentinel.master_address
        at = "not found yet" if found is None else address(*found)
        sentinels = ",".join(address(host, port) for host, port in self._master.sentinels)
        return f"Redis Sentinel master {self._master.name!r} at {at} (sentinels {sentinels})"

    async def _run(self, command: Awaitable[T]) -> T:
        """One command, within what the request's store budget leaves (kit/deadline.py): a
        frozen Redis costs a request one REDIS_TIMEOUT_SECONDS, not one per call. Outside a
        request (background work) the connection's own timeout applies."""
        budget = deadline.store_budget()
        if budget is None:
            with _answering(self._health):
                return await command
        left = budget.left
        if left <= 0:
            if asyncio.iscoroutine(command):
                command.close()  # never started: no "never awaited" warning
            raise StoreUnavailable()
        started = time.monotonic()
        try:
            with _answering(self._health):
                if left >= self._timeout:
                    return await command  # the connection's timeout is the shorter
                async with asyncio.timeout(left):
                    return await command
        except TimeoutError:
            raise StoreUnavailable() from None
        finally:
            budget.spend(time.monotonic() - started)

    async def ping(self) -> None:
        await self._redis.ping()

    async def get(self, key: str) -> Any | None:
        raw = await self._run(self._redis.get(self._k(key)))
        return None if raw is None else json.loads(raw)

    async def get_many(self, keys: list[str]) -> list[Any | None]:
        if not keys:
            return []
        raws = await self._run(self._redis.mget([self._k(key) for key in keys]))
        return [None if raw is None else json.loads(raw) for raw in raws]

    async def set(self, key: str, value: Any, ttl: float | None = None) -> None:
        px = _px(ttl)
        payload = json.dumps(value, separators=(",", ":"))
        await self._run(self._redis.set(self._k(key), payload, px=px))

    async def set_replicated(self, key: str, value: Any, ttl: float | None = None) -> None:
        if self._sentinel is None:
            # One Redis (REDIS_URL): no failover to survive, so nothing to wait for.
            await self.set(key, value, ttl)
            return
        if time.monotonic() < self._no_replica_until:
            await self.set(key, value, ttl)
            return
        payload = json.dumps(value, separators=(",", ":"))
        px = _px(ttl)
        # WAIT on the connection that wrote: it returns once a replica has every write up
        # to this one (Sentinel promotes the replica that has the most of them).
        async with self._redis.pipeline(transaction=False) as pipe:
            pipe.set(self._k(key), payload, px=px)
            pipe.wait(1, self._wait_ms)
            _, acked = await self._run(pipe.execute())
        if int(acked) < 1:
            self._no_replica_until = time.monotonic() + NO_REPLICA_SECONDS
            log.warning(
                "no Redis replica confirmed a write within %d ms: writes that should "
                "survive a failover are not waited for during the next %d s",
                self._wait_ms,
                NO_REPLICA_SECONDS,
            )

    async def set_if_absent(self, key: str, value: Any, ttl: float | None = None) -> bool:
        px = _px(ttl)
        payload = json.dumps(value, separators=(",", ":"))
        done = await self._run(self._redis.set(self._k(key), payload, px=px, nx=True))
        return bool(done)

    async def delete(self, key: str) -> None:
        await self._run(self._redis.delete(self._k(key)))

    async def lease(self, key: str, owner: str, ttl: float) -> bool:
        px = max(0, int(ttl * 1000))
        claimed = await self._run(self._redis.eval(LEASE, 1, self._k(key), json.dumps(owner), px))
        return bool(claimed)

    async def incr(self, key: str, amount: int = 1, ttl: float | None = None) -> int:
        name = self._k(key)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.incrby(name, amount)
            if ttl is not None:
                # NX: the window's expiry is set once, when the counter is created.
                pipe.pexpire(name, max(1, int(ttl * 1000)), nx=True)
            result = await self._run(pipe.execute())
        return int(result[0])

    async def take_if(self, series: Sequence[Series], rule: Rule) -> tuple[bool, list[list[int]]]:
        keys = [self._k(key) for one in series for key in one.keys]
        spec = {
            "sizes": [len(one.keys) for one in series],
            "ttls": [_px(one.ttl) for one in series],
            "take": [1 if one.take else 0 for one in series],
            "rule": rule,
        }
        out: Any = await self._run(self._take_if(keys=keys, args=[json.dumps(spec)]))
        counts = [int(value) for value in out[1:]]
        values: list[list[int]] = []
        at = 0
        for one in series:
            values.append(counts[at : at + len(one.keys)])
            at += len(one.keys)
        return bool(out[0]), values

    async def ttl(self, key: str) -> float | None:
        ms = await self._run(self._redis.pttl(self._k(key)))
        return None if ms is None or ms < 0 else ms / 1000

    async def log_append(self, key: str, value: Any, max_len: int) -> None:
        # MAXLEN ~: Redis trims whole blocks of entries, cheaply, keeping at least max_len.
        payload = json.dumps(value, separators=(",", ":"))
        await self._run(
            self._redis.xadd(self._k(key), {"v": payload}, maxlen=max_len, approximate=True)
        )

    async def log_read(
        self, key: str, count: int, before: str | None = None
    ) -> list[tuple[str, Any]]:
        # "(" makes the upper bound exclusive (Redis 6.2+).
        upper = "+" if before is None else "(" + before
        entries: Any = await self._run(self._redis.xrevrange(self._k(key), upper, "-", count=count))
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
                if await self._run(lock.acquire(blocking=False, token=token)):
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    raise LockTimeout(name)
                await asyncio.sleep(LOCK_POLL_SECONDS)
        except asyncio.CancelledError:
            await self._release(lock, token, timeout)
            raise
        except StoreUnavailable:
            # The SET may have been applied with its answer lost (a master killed
            # mid-command): the lock may be ours, so it is released when Redis answers again.
            self._release_when_back(lock, token, timeout)
            raise
        try:
            yield
        finally:
            await self._release(lock, token, timeout)

    async def _release(self, lock: Lock, token: bytes, timeout: float) -> None:
        """Delete the lock if it still holds our token: it may have expired while held and be
        someone else's by now. Shielded: a request cancelled (again) while it releases leaves
        no lock behind to block its zone until it expires; the release goes on without it.
        With Redis away meanwhile, the work done under it stands, and the lock is released
        as soon as Redis answers again (a failover must not keep a zone locked for the
        lock's whole timeout)."""
        release = asyncio.ensure_future(lock.do_release(token))
        release.add_done_callback(lambda task: self._released(task, lock, token, timeout))
        with contextlib.suppress(LockError, *_AWAY):
            await asyncio.shield(release)

    def _released(
        self, task: asyncio.Future[None], lock: Lock, token: bytes, timeout: float
    ) -> None:
        """A release's failure is expected (not ours, Redis away): read, never logged; with
        Redis away, tried again when it answers."""
        if not task.cancelled() and isinstance(task.exception(), _AWAY):
            self._release_when_back(lock, token, timeout)

    def _release_when_back(self, lock: Lock, token: bytes, timeout: float) -> None:
        """Release `lock` if `token` still holds it, once Redis answers again and before
        the lock would have expired anyway. One task retries them all."""
        if self._closed or len(self._unreleased) >= MAX_UNRELEASED:
            return  # it expires by its timeout
        self._unreleased[token] = (lock, time.monotonic() + timeout)
        if self._releaser is None or self._releaser.done():
            self._releaser = asyncio.ensure_future(self._release_unreleased())

    async def _release_unreleased(self) -> None:
        while self._unreleased:
            await asyncio.sleep(RELEASE_RETRY_SECONDS)
            for token, (lock, until) in list(self._unreleased.items()):
                if time.monotonic() < until:
                    try:
                        await lock.do_release(token)
                    except LockError:
                        pass  # expired, or never taken: not ours
                    except _AWAY:
                        break  # still away: all of them again on the next round
                    except Exception:
                        log.exception("releasing a lock left by a lost connection failed")
                del self._unreleased[token]

    async def close(self) -> None:
        await tasks.stop(self._releaser)
        self._closed = True
        clients = [self._redis, *(() if self._sentinel is None else self._sentinel.clients)]
        for client in clients:  # each one, whatever another one raised
            try:
                await client.aclose()
            except (*_AWAY, OSError) as exc:
                log.warning("closing a Redis connection failed: %s", exc)
