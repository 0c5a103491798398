"""A creation's wait for its zone (DECISIONS.md: one creation a zone at a time) ends within
the answer's deadline: a busy zone answers 503 zone_busy, and the POST after the wait gets
only the time the wait left."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import redis

from tests.conftest import Simulator, StartGateway
from tests.support import wait_until
from tests.tickets.conftest import hang_ticket_posts, post_calls, refusal, ticket_body


def test_a_busy_zone_answers_503_within_the_wait(
    sim: Simulator, start_gateway: StartGateway
) -> None:
    # The first creation holds zone 3's lock while its POST hangs up to the 7 s timeout;
    # a second creation for the zone waits 5 s at most, then answers 503 zone_busy.
    gw = start_gateway(sim.url, UPSTREAM_TIMEOUT_SECONDS=7.0)
    hang_ticket_posts(sim, 30.0)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(gw.post, "/api/v1/tickets", json=ticket_body(zone_id=3, service_id=301))
        wait_until(lambda: post_calls(sim) == 1, message="the first POST to hang upstream")
        started = time.monotonic()
        busy = gw.post("/api/v1/tickets", json=ticket_body(zone_id=3, service_id=302))
        waited = time.monotonic() - started
        assert refusal(busy, 503) == ("ticket_creation_failed", "zone_busy")
        assert busy.headers["retry-after"]
        assert 4.5 <= waited < 6.5
        assert first.result().json()["meta"]["reason"] == "outcome_unknown"
    assert post_calls(sim) == 1


DEADLINE_DB = 2


def held_zone_lock(redis_url: Callable[[int], str], seconds: float) -> str:
    """Zone 3's lock held in the shared store by another replica for `seconds` (the test's
    own database, emptied first); the store's URL."""
    url = redis_url(DEADLINE_DB)
    with contextlib.closing(redis.Redis.from_url(url)) as client:
        client.flushdb()
        client.set("ispgw:lock:zone:3", "another-replica", px=int(seconds * 1000))
    return url


def test_a_wait_for_the_zone_ends_within_the_deadline(
    sim: Simulator, start_gateway: StartGateway, redis_url: Callable[[int], str]
) -> None:
    """CALLERS.md 2, every answer within UPSTREAM_TIMEOUT_SECONDS + 2 s: the zone wait (5 s)
    was longer than a 2 s timeout allows."""
    gw = start_gateway(
        sim.url, UPSTREAM_TIMEOUT_SECONDS=2.0, REDIS_URL=held_zone_lock(redis_url, 30)
    )
    started = time.monotonic()
    busy = gw.post("/api/v1/tickets", json=ticket_body(zone_id=3, service_id=301))
    assert time.monotonic() - started < 2.0 + 2
    assert refusal(busy, 503) == ("ticket_creation_failed", "zone_busy")
    assert post_calls(sim) == 0


def test_a_post_gets_only_the_time_the_zone_wait_left(
    sim: Simulator, start_gateway: StartGateway, redis_url: Callable[[int], str]
) -> None:
    """After 4 s waiting for the zone, a hanging POST had its whole 6 s timeout again: the
    answer came after 10 s, past the 8 s a bot is promised."""
    gw = start_gateway(
        sim.url, UPSTREAM_TIMEOUT_SECONDS=6.0, REDIS_URL=held_zone_lock(redis_url, 4)
    )
    hang_ticket_posts(sim, 30.0)
    started = time.monotonic()
    response = gw.post("/api/v1/tickets", json=ticket_body(zone_id=3, service_id=301))
    took = time.monotonic() - started
    assert 3.5 < took < 6.0 + 2, took
    assert refusal(response, 502) == ("ticket_creation_failed", "outcome_unknown")
    assert post_calls(sim) == 1
