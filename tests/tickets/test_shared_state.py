"""The cap across workers (a shared Redis store), and tickets the upstream list lags behind."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import redis

from tests.conftest import Gateway, Simulator
from tests.tickets.conftest import post_calls, ticket_body

REDIS_URL = "redis://127.0.0.1:6379/12"


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


def test_two_workers_sharing_redis_create_one_ticket_for_one_slot(
    sim: Simulator, start_gateway: Callable[..., Gateway], shared_redis: str
) -> None:
    workers = [
        start_gateway(sim.url, REDIS_URL=shared_redis, UPSTREAM_PAGE_SIZE=2) for _ in range(2)
    ]

    def create(n: int) -> httpx.Response:
        return workers[n % 2].post("/api/v1/tickets", json=ticket_body(description=f"r{n}"))

    with ThreadPoolExecutor(20) as pool:
        responses = list(pool.map(create, range(20)))
    assert sorted(r.status_code for r in responses) == [201] + [409] * 19
    assert len(sim.state.created_tickets) == 1
    assert post_calls(sim) == 1


def test_two_workers_share_idempotency_records(
    sim: Simulator, start_gateway: Callable[..., Gateway], shared_redis: str
) -> None:
    workers = [start_gateway(sim.url, REDIS_URL=shared_redis) for _ in range(2)]
    key = {"Idempotency-Key": "shared-key-1"}

    def create(n: int) -> httpx.Response:
        body = ticket_body(zone_id=3, service_id=301)
        return workers[n % 2].post("/api/v1/tickets", json=body, headers=key)

    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(create, range(8)))
    assert {r.status_code for r in responses} == {201}
    assert len({r.json()["data"]["ticket_id"] for r in responses}) == 1
    assert len(sim.state.created_tickets) == 1


def test_a_ticket_just_created_counts_while_the_list_lags(gw: Gateway, sim: Simulator) -> None:
    created = gw.post("/api/v1/tickets", json=ticket_body(zone_id=3, service_id=301))
    assert created.status_code == 201
    ticket_id = created.json()["data"]["ticket_id"]
    row = sim.state.get_ticket(ticket_id)
    # The upstream's list does not show it yet; the ticket itself exists.
    sim.state.dataset.tickets.remove(row)
    sim.state.reset_stats()
    zone = gw.get("/api/v1/tickets/zone-blocked/3").json()["data"]
    assert zone["active_tickets"] == 1
    assert sim.state.calls["GET /api/tickets/{id}/"] == 1
    # Once it is closed it no longer counts.
    row["estado"] = 3
    assert gw.get("/api/v1/tickets/zone-blocked/3").json()["data"]["active_tickets"] == 0
    # A ticket the list shows is never asked for one by one.
    sim.state.dataset.tickets.append(row)
    row["estado"] = 1
    sim.state.reset_stats()
    assert gw.get("/api/v1/tickets/zone-blocked/3").json()["data"]["active_tickets"] == 1
    assert sim.state.calls["GET /api/tickets/{id}/"] == 0
