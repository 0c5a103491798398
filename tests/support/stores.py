"""The store a test runs on (memory, or a database of the run's Redis), and the keys it
leaves in a shared Redis."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
import redis.asyncio as aioredis

from isp_gateway.store import MemoryStore, Store
from isp_gateway.store.redis import RedisStore


def redis_db_url(base: str, db: int) -> str:
    """`base` (a Redis URL, any database) pointed at database `db`, its query kept."""
    parts = urlsplit(base)
    return urlunsplit((parts.scheme, parts.netloc, f"/{db}", parts.query, ""))


@contextmanager
def emptied_redis(url: str, *patterns: str) -> Iterator[redis.Redis]:
    """A client of the Redis database at `url`, its keys matching `patterns` deleted before
    and after; without patterns, the whole database (one of the test module's own). No skip:
    a missing Redis fails the test, since what it checks depends on Redis."""
    client = redis.Redis.from_url(url)

    def empty() -> None:
        if not patterns:
            client.flushdb()
        for pattern in patterns:
            for key in client.scan_iter(match=pattern, count=1000):
                client.delete(key)

    empty()
    try:
        yield client
    finally:
        empty()
        client.close()


async def delete_keys(url: str, pattern: str) -> None:
    """Delete the keys matching `pattern` in the Redis database at `url` (never FLUSHDB:
    other suites may share the database)."""
    client = aioredis.Redis.from_url(url)
    try:
        async for key in client.scan_iter(match=pattern):
            await client.delete(key)
    finally:
        await client.aclose()


# This test process's own mark in the keys its tests write to a shared Redis database.
RUN = uuid.uuid4().hex[:12]


def memory_or_redis_store(db: int, keys: str) -> Any:
    """A module's `store` fixture (`store = memory_or_redis_store(REDIS_DB, "ispgw:x:*")`):
    its tests run on a MemoryStore, then on a RedisStore (`memory_or_redis`)."""

    @pytest.fixture(params=["memory", "redis"])
    async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
        async with memory_or_redis(request, db, keys) as opened:
            yield opened

    return store


@asynccontextmanager
async def memory_or_redis(
    request: pytest.FixtureRequest, db: int, keys: str | None = None
) -> AsyncIterator[Store]:
    """The store of a fixture parametrized with ["memory", "redis"]: a MemoryStore, or a
    RedisStore on database `db` of this run's Redis (`redis_url`), answering a ping, with the
    keys matching `keys` (when given) deleted before and after."""
    if request.param == "memory":
        memory = MemoryStore()
        try:
            yield memory
        finally:
            await memory.close()
        return
    url = request.getfixturevalue("redis_url")(db)
    async with redis_store_on(RedisStore(url), url, keys) as redis_store:
        yield redis_store


@asynccontextmanager
async def redis_store_on(
    redis_store: RedisStore, url: str, keys: str | None = None
) -> AsyncIterator[RedisStore]:
    """`redis_store` (of the Redis database at `url`, which it may reach another way, e.g.
    through Sentinel) once it answers a ping, closed at exit; the keys matching `keys`
    (when given) deleted before and after."""
    if keys is not None:
        await delete_keys(url, keys)
    try:
        await redis_store.ping()
        yield redis_store
    finally:
        await redis_store.close()
        if keys is not None:
            await delete_keys(url, keys)
