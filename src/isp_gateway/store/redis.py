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
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import redis.asyncio as aioredis
from redis.asyncio.lock import Lock
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import MasterNotFoundError, Sentinel, SentinelManagedConnection
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import LockError, ReadOnlyError
from redis.exceptions import TimeoutError as RedisTimeoutError

from isp_gateway.kit.errors import StoreUnavailable
from isp_gateway.kit.storage import LockTimeout

log = logging.getLogger("isp_gateway.store")

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
_LEASE = """local v = redis.call('GET', KEYS[1]) if v and v ~= ARGV[1] then return 0 end
if ARGV[2] == '0' then redis.call('DEL', KEYS[1]) return 1 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1"""
# Errors that mean "the store is away" (READONLY: a master demoted under us, outside Sentinel).
_AWAY = (RedisConnectionError, RedisTimeoutError, ReadOnlyError)


class _FollowingConnection(SentinelManagedConnection):
    """A connection to the master that asks the sentinels where it is whenever it
    reconnects. redis-py (8.1) reconnects a connection dropped inside a command's retries
    at the address it had (`send_packed_command`), not through the sentinel lookup of its
    `connect`: the retries after a READONLY, or after the master died, went back to the old
    master, and only the next command found the new one."""

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if not self.is_connected:
            await self.connect()  # type: ignore[no-untyped-call]  # redis-py: untyped
        await super().send_packed_command(command, check_health)


class _Sentinels(Sentinel):
    """redis-py's Sentinel with a discovery that holds when several run at once (a failover
    makes every connection rediscover). redis-py's walks its list of sentinels while other
    discoveries reorder it (the one that answered moves to the front, swapped by positions
    read before awaiting): with the first sentinel down, 19 of 20 discoveries at once found
    no master although another sentinel answered, and the list could lose a sentinel and
    hold another twice (the lost one never asked again, nor closed). Here each discovery
    walks a copy, and the sentinel that answered moves to the front by identity."""

    def __init__(self, sentinels: list[tuple[str, int]], **kwargs: Any) -> None:
        super().__init__(sentinels, **kwargs)  # type: ignore[no-untyped-call]  # untyped
        self.clients: tuple[aioredis.Redis, ...] = tuple(self.sentinels)

    async def discover_master(self, service_name: str) -> tuple[str, int]:
        away = 0
        for sentinel in list(self.sentinels):
            try:
                # A dict by master name (RESP2, this client's protocol).
                masters = cast(dict[str, Any], await sentinel.sentinel_masters())
            except (RedisConnectionError, RedisTimeoutError):
                away += 1
                continue
            state = masters.get(service_name)
            if state and self.check_master_state(state, service_name):
                self.sentinels.remove(sentinel)
                self.sentinels.insert(0, sentinel)
                return state["ip"], int(state["port"])
        raise MasterNotFoundError(
            f"no sentinel answered with a master named {service_name!r} that is up "
            f"({away} of {len(self.clients)} sentinels did not answer)"
        )


@dataclass(frozen=True)
class SentinelMaster:
    """A master found through Redis Sentinel: the sentinels' addresses, the master's name
    in them, the master's password and the sentinels' own."""

    sentinels: tuple[tuple[str, int], ...]
    name: str
    password: str | None = field(default=None, repr=False)
    sentinel_password: str | None = field(default=None, repr=False)


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
    except _AWAY:
        # redis-py's message names host and port only; the URL (and its password) stays out.
        raise StoreUnavailable() from None
    if _cancel_requests() > requested:
        raise asyncio.CancelledError()


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
        self._sentinel: _Sentinels | None = None
        self._redis: aioredis.Redis
        if sentinel is not None:
            self._sentinel = _Sentinels(
                list(sentinel.sentinels),
                # Each sentinel is asked once per discovery: one that is down is skipped for
                # the next at once (redis-py's default retries would wait seconds on it).
                sentinel_kwargs={
                    "socket_timeout": timeout,
                    "socket_connect_timeout": timeout,
                    "password": sentinel.sentinel_password,
                    "retry": Retry(NoBackoff(), retries=0),
                },
            )
            self._redis = self._sentinel.master_for(
                sentinel.name,
                password=sentinel.password,
                connection_class=_FollowingConnection,
                **options,
            )
        elif url is not None:
            self._redis = aioredis.Redis.from_url(url, retry_on_timeout=False, **options)
        else:
            raise ValueError("RedisStore needs a URL or a SentinelMaster")
        self._wait_ms = int(min(REPLICA_WAIT_SECONDS, timeout / 2) * 1000)
        self._no_replica_until = 0.0
        self._unreleased: dict[bytes, tuple[Lock, float]] = {}
        self._releaser: asyncio.Task[None] | None = None
        self._closed = False

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
        with _answering():
            async with self._redis.pipeline(transaction=False) as pipe:
                pipe.set(self._k(key), payload, px=px)
                pipe.wait(1, self._wait_ms)
                _, acked = await pipe.execute()
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
        with _answering():
            done = await self._redis.set(
                self._k(key), json.dumps(value, separators=(",", ":")), px=px, nx=True
            )
        return bool(done)

    async def delete(self, key: str) -> None:
        with _answering():
            await self._redis.delete(self._k(key))

    async def lease(self, key: str, owner: str, ttl: float) -> bool:
        px = max(0, int(ttl * 1000))
        with _answering():
            return bool(await self._redis.eval(_LEASE, 1, self._k(key), json.dumps(owner), px))

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
        if self._releaser is not None:
            self._releaser.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._releaser
        self._closed = True
        clients = [self._redis, *(() if self._sentinel is None else self._sentinel.clients)]
        for client in clients:  # each one, whatever another one raised
            try:
                await client.aclose()
            except (*_AWAY, OSError) as exc:
                log.warning("closing a Redis connection failed: %s", exc)
