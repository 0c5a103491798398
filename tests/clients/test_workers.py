"""Two workers sharing a Redis store share the client cache and its refreshes."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.clients.conftest import StartPair, adopted, calls, warm
from tests.clients.test_verify_update import GOOD, verify
from tests.conftest import StartGateway, StartSimulator
from tests.support import wait_until

REDIS_DB = 14


def test_workers_refresh_the_shared_list_once_per_period(
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
    data_file: Path,
    shared_redis: str,
) -> None:
    sim = start_simulator(data_file=data_file)  # one page per load
    # A 5 s lifetime: the refresh starts at 4 s, and a worker that stalls (a full garbage
    # collection in a busy test process, two workers to a core) has 1 s to publish it
    # before an answer would be stale; 2 s, with 0.4 s, was once too little on CI.
    first = start_gateway(sim.url, REDIS_URL=shared_redis, CLIENT_CACHE_SECONDS=5)
    warm(first)
    # Real time, on purpose: the second worker's schedule is out of step with the first's.
    time.sleep(0.7)
    second = start_gateway(sim.url, REDIS_URL=shared_redis, CLIENT_CACHE_SECONDS=5)
    # It takes up the first one's list from Redis (no load of its own).
    wait_until(lambda: second.runtime.services.clients.cache.local is not None)
    sim.state.reset_stats()
    # Two refresh periods (4 s each): one load per period between the two workers (2, or 3
    # at a period's edge), not one per worker (4). Real time: what must not happen in it is
    # a load per worker.
    deadline = time.monotonic() + 8.0
    while time.monotonic() < deadline:
        for worker in (first, second):
            response = worker.get("/api/v1/clients/by-document/12345678")
            assert response.status_code == 200
            # Never stale; CALLERS.md 2: the meta names the other services (none here).
            assert response.json()["meta"] == {"other_service_ids": []}
        time.sleep(0.05)  # the pace of the lookups
    assert calls(sim) <= 3


def test_parallel_guesses_cannot_outrun_the_verify_lock(
    start_pair: StartPair, shared_redis: str
) -> None:
    # With Redis every store call really suspends, so parallel requests interleave.
    _, gw = start_pair(REDIS_URL=shared_redis, VERIFY_MAX_FAILURES=3, VERIFY_LOCKOUT_SECONDS=60)
    # Twelve different wrong guesses at once: only three may be compared with the record.
    guesses = [{**GOOD, "name": f"Pedro {n}"} for n in range(12)]
    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda g: verify(gw, 101, g).json()["action"], guesses))
    assert answers.count("client_verification_failed") == 3
    assert answers.count("client_verification_locked") == 9
    # Even the right answer is refused now.
    assert verify(gw, 101, GOOD).json()["action"] == "client_verification_locked"


def test_a_miss_is_rechecked_once_across_two_workers(
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
    data_file: Path,
    shared_redis: str,
) -> None:
    """CALLERS.md 2: a value that misses the complete index is asked upstream at most once
    per MISS_RECHECK_SECONDS across all workers, however the misses are spread."""
    sim = start_simulator(data_file=data_file)
    workers = [
        start_gateway(sim.url, REDIS_URL=shared_redis, NEGATIVE_CACHE_SECONDS=0) for _ in range(2)
    ]
    warm(workers[0])  # the second adopts the shared copy
    adopted(workers[1])  # and has nothing of its own in flight when the calls are counted
    assert workers[1].get("/api/v1/clients/").status_code == 200
    sim.state.reset_stats()
    paths = ["/api/v1/clients/by-document/424242", "/api/v1/clients/by-phone/3009990001"]
    jobs = [(worker, path) for _ in range(5) for worker in workers for path in paths]
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda job: job[0].get(job[1]).status_code, jobs))
    assert statuses == [404] * len(jobs)
    assert calls(sim) == 2  # one per value, not one per worker or per request
