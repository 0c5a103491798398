"""Two workers sharing a Redis store share the client cache and its refreshes."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from tests.clients.conftest import calls, warm
from tests.conftest import Gateway, Simulator

REDIS_URL = "redis://127.0.0.1:6379/14"


@pytest.fixture
def shared_redis() -> Iterator[str]:
    # No skip: a missing Redis must fail this test, since the guarantee depends on it.
    client = redis.Redis.from_url(REDIS_URL)
    client.flushdb()
    try:
        yield REDIS_URL
    finally:
        client.flushdb()
        client.close()


def test_workers_refresh_the_shared_list_once_per_period(
    start_simulator: Callable[..., Simulator],
    start_gateway: Callable[..., Gateway],
    data_file: Path,
    shared_redis: str,
) -> None:
    sim = start_simulator(data_file=data_file)  # one page per load
    first = start_gateway(sim.url, REDIS_URL=shared_redis, CLIENT_CACHE_SECONDS=2)
    warm(first)
    time.sleep(0.7)  # the second worker's schedule is out of step with the first's
    second = start_gateway(sim.url, REDIS_URL=shared_redis, CLIENT_CACHE_SECONDS=2)
    time.sleep(0.3)
    sim.state.reset_stats()
    # Four refresh periods (1.6 s each): one load per period between the two workers,
    # not one per worker.
    deadline = time.monotonic() + 6.4
    while time.monotonic() < deadline:
        for worker in (first, second):
            response = worker.get("/api/v1/clients/by-document/12345678")
            assert response.status_code == 200
            assert response.json()["meta"] is None
        time.sleep(0.05)
    assert calls(sim) <= 6
