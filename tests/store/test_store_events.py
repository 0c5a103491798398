"""Issue 28, point 17: the logs say which store is in use (memory, the Redis URL without its
password, the Sentinel master's name and address), and write one WARNING when the store is
lost, one when it is back and one when Sentinel moves the master (naming the new address):
once per transition, however many requests meet it."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pytest
import redis

from isp_gateway.kit.errors import StoreUnavailable
from isp_gateway.store.redis import RedisStore, SentinelMaster
from tests.conftest import Gateway, Simulator, StartGateway
from tests.support import SENTINEL_MASTER, RedisServer, SentinelGroup

PASSWORD = "store-pass-0123456789"


def store_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [
        (r.levelname, r.getMessage())
        for r in caplog.records
        if r.name in ("isp_gateway", "isp_gateway.store")
        and r.getMessage().startswith(("store", "Redis Sentinel:"))
    ]


def started_with(
    caplog: pytest.LogCaptureFixture, start: Callable[[], Gateway]
) -> list[tuple[str, str]]:
    caplog.set_level(logging.INFO, logger="isp_gateway")
    start()
    return [line for line in store_lines(caplog) if line[1].startswith("store: ")]


def test_the_memory_store_is_named_at_start(
    caplog: pytest.LogCaptureFixture, simulator: Simulator, start_gateway: StartGateway
) -> None:
    assert started_with(caplog, lambda: start_gateway(simulator.url)) == [
        ("INFO", "store: memory, this process only (REDIS_URL or REDIS_SENTINELS share it)")
    ]


def test_a_redis_url_is_named_without_its_password(
    caplog: pytest.LogCaptureFixture,
    simulator: Simulator,
    start_gateway: StartGateway,
    own_redis: RedisServer,
) -> None:
    with redis.Redis(port=own_redis.port) as client:
        client.config_set("requirepass", PASSWORD)
    url = f"redis://default:{PASSWORD}@127.0.0.1:{own_redis.port}/4?health_check_interval=30"
    lines = started_with(caplog, lambda: start_gateway(simulator.url, REDIS_URL=url))
    assert lines == [("INFO", f"store: Redis redis://default@127.0.0.1:{own_redis.port}/4")]
    assert PASSWORD not in caplog.text


def test_a_sentinel_master_is_named_with_its_address(
    caplog: pytest.LogCaptureFixture,
    simulator: Simulator,
    start_gateway: StartGateway,
    sentinel_group: SentinelGroup,
) -> None:
    settings = {
        "REDIS_SENTINELS": sentinel_group.addresses,
        "REDIS_SENTINEL_MASTER": SENTINEL_MASTER,
    }
    lines = started_with(caplog, lambda: start_gateway(simulator.url, **settings))
    assert lines == [
        (
            "INFO",
            f"store: Redis Sentinel master 'mymaster' at 127.0.0.1:{sentinel_group.master.port} "
            f"(sentinels {sentinel_group.addresses})",
        )
    ]


@pytest.mark.anyio
async def test_a_lost_store_and_its_return_are_logged_once_each(
    caplog: pytest.LogCaptureFixture, own_redis: RedisServer
) -> None:
    caplog.set_level(logging.INFO, logger="isp_gateway")
    store = RedisStore(f"redis://127.0.0.1:{own_redis.port}/5", timeout=1)
    try:
        await store.set("issue28:k", 1)
        assert store_lines(caplog) == []
        own_redis.stop()
        for _ in range(20):  # many requests meet the outage: one line
            with pytest.raises(StoreUnavailable):
                await store.get("issue28:k")
        where = f"Redis redis://127.0.0.1:{own_redis.port}/5"
        assert store_lines(caplog) == [
            (
                "WARNING",
                f"store lost: {where} does not answer (ConnectionError); requests that need "
                "it answer 503 store_unavailable until it is back",
            )
        ]
        own_redis.start()
        for _ in range(5):
            assert await store.get("issue28:k") is None  # no persistence: empty again
        lines = store_lines(caplog)
        assert len(lines) == 2
        assert lines[1][0] == "WARNING"
        assert lines[1][1].startswith(f"store back: {where} answers again after ")
    finally:
        await store.close()


@pytest.mark.anyio
async def test_a_sentinel_failover_is_logged_with_the_new_address(
    caplog: pytest.LogCaptureFixture, sentinel_group: SentinelGroup
) -> None:
    caplog.set_level(logging.INFO, logger="isp_gateway")
    sentinels = tuple(("127.0.0.1", sentinel.port) for sentinel in sentinel_group.sentinels)
    store = RedisStore(timeout=1, sentinel=SentinelMaster(sentinels, SENTINEL_MASTER))
    old = sentinel_group.master.port
    try:
        await store.set("issue28:k", 1)
        assert f"master 'mymaster' at 127.0.0.1:{old} " in store.describe()
        assert sentinel_group.master.process is not None
        sentinel_group.master.process.kill()
        deadline = time.monotonic() + 30
        failures = 0
        while True:  # requests go on through the failover
            try:
                await store.set("issue28:k", 2)
                break
            except StoreUnavailable:
                failures += 1
            assert time.monotonic() < deadline, "no failover"
        new = sentinel_group.master_port()
        assert failures > 1 and new != old
        for _ in range(5):
            await store.get("issue28:k")
    finally:
        await store.close()
    lines = store_lines(caplog)
    assert [level for level, _ in lines] == ["WARNING"] * 3, lines
    lost, moved, back = (message for _, message in lines)
    assert lost.startswith(f"store lost: Redis Sentinel master 'mymaster' at 127.0.0.1:{old} ")
    assert moved == (
        f"Redis Sentinel: master 'mymaster' moved to 127.0.0.1:{new} (was 127.0.0.1:{old})"
    )
    assert back.startswith(
        f"store back: Redis Sentinel master 'mymaster' at 127.0.0.1:{new} (sentinels "
    )
