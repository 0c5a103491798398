"""Two gateway workers sharing one Redis store: one task record, one upstream read per interval."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis

from tests.conftest import Gateway, StartGateway, StartSimulator
from tests.network.test_ping_api import (
    PING_CREATES,
    TASK_READS,
    create,
    decided,
    poll,
    service_ids,
)
from tests.support import wait_until

REDIS_DB = 13


@pytest.fixture
def db_url(redis_url: Callable[[int], str]) -> str:
    return redis_url(REDIS_DB)


@pytest.fixture
def made_keys(db_url: str) -> Iterator[list[str]]:
    """Store keys the test creates, deleted at the end. No FLUSHDB: other suites may share
    this Redis at the same time. Fails, never skips, without Redis (the guarantee needs it)."""
    client = redis.Redis.from_url(db_url)
    client.ping()
    keys: list[str] = []
    try:
        yield keys
    finally:
        if keys:
            client.delete(*(f"ispgw:{key}" for key in keys))
        client.close()


def test_workers_share_tasks_and_fan_in(
    db_url: str,
    made_keys: list[str],
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
) -> None:
    sim = start_simulator(ping_duration=1.5)
    interval = 0.5
    settings = {"REDIS_URL": db_url, "PING_POLL_INTERVAL_SECONDS": interval}
    first, second = start_gateway(sim.url, **settings), start_gateway(sim.url, **settings)
    # A random service: a concurrent run of this test must not join our task.
    sid = random.choice(service_ids(sim, 200))
    sim.state.set_ping_outcome(sid, "all_replies")
    # Concurrent creates on both workers share one upstream task.
    with ThreadPoolExecutor(6) as pool:
        ids = list(pool.map(lambda i: create((first, second)[i % 2], sid), range(6)))
    assert len(set(ids)) == 1 and sim.state.calls[PING_CREATES] == 1
    task_id = ids[0]
    made_keys += [f"ping:task:{task_id}", f"ping:service:{sid}"]
    started = time.monotonic()
    actions: list[str] = []

    def poller(gw: Gateway) -> None:
        deadline = time.monotonic() + 2.3
        while time.monotonic() < deadline:
            actions.append(poll(gw, task_id)["action"])
            time.sleep(0.02)  # the pace of a client's polls, not a wait

    with ThreadPoolExecutor(6) as pool:
        for future in [pool.submit(poller, (first, second)[i % 2]) for i in range(6)]:
            future.result()
    # The ping ends about 2 s in, a little before the pollers stop (2.3 s): a stalled
    # process may stop them first, so the final answer is waited for, not taken from them.
    final = wait_until(lambda: decided(poll(first, task_id)), message="a final answer")
    elapsed = time.monotonic() - started
    reads = sim.state.calls[TASK_READS]
    assert final["action"] == "stable_connection" and "ping_pending" in actions
    assert 1 <= reads <= int(elapsed / interval) + 1
    # The final record answers on either worker without asking the upstream again.
    assert poll(second, task_id)["action"] == poll(first, task_id)["action"]
    assert sim.state.calls[TASK_READS] == reads
