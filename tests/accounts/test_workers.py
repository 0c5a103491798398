"""Two workers sharing a Redis store share the pending-invoice list and its loads."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from tests.accounts.conftest import SECRETS, warm_invoices
from tests.clients.conftest import warm
from tests.conftest import Gateway, Simulator

# A database of its own; only the keys of this module's gateways live there.
REDIS_URL = "redis://127.0.0.1:6379/10"


def _until(condition: Callable[[], bool], what: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _delete_ours(client: redis.Redis) -> None:
    for key in client.scan_iter(match="ispgw:*", count=500):
        client.delete(key)


@pytest.fixture
def shared_redis() -> Iterator[redis.Redis]:
    # No skip: a missing Redis must fail this test, since the guarantee depends on it.
    client = redis.Redis.from_url(REDIS_URL)
    _delete_ours(client)
    try:
        yield client
    finally:
        _delete_ours(client)
        client.close()


def test_workers_share_one_pending_list_load(
    start_simulator: Callable[..., Simulator],
    start_gateway: Callable[..., Gateway],
    account_data: Path,
    shared_redis: redis.Redis,
) -> None:
    sim = start_simulator(data_file=account_data)
    first = start_gateway(sim.url, REDIS_URL=REDIS_URL, UPSTREAM_PAGE_SIZE=2)
    warm(first)
    warm_invoices(first)
    assert sim.state.calls["GET /api/facturas/"] == 4  # one load of four pages
    second = start_gateway(sim.url, REDIS_URL=REDIS_URL, UPSTREAM_PAGE_SIZE=2)
    # The second worker adopts the stored lists instead of loading them again.
    _until(
        lambda: second.runtime.accounts.invoices.local is not None,
        "the second worker did not adopt the list",
    )
    sim.state.reset_stats()
    for worker in (first, second):
        response = worker.get("/api/v1/clients/202/account")
        assert response.status_code == 200
        assert response.json()["data"]["total_due"] == 92501.5
    assert sim.state.calls["GET /api/facturas/"] == 0
    assert second.runtime.accounts.invoices.loads == 0
    # What the workers share holds no private field of the upstream rows either.
    for key in shared_redis.scan_iter(match="ispgw:*", count=500):
        value = shared_redis.get(key)
        if value is not None:
            assert not any(secret.encode() in value for secret in SECRETS.values()), key


def test_a_confirmation_on_one_worker_serves_the_other(
    start_simulator: Callable[..., Simulator],
    start_gateway: Callable[..., Gateway],
    account_data: Path,
    shared_redis: redis.Redis,
) -> None:
    sim = start_simulator(data_file=account_data)
    first = start_gateway(sim.url, REDIS_URL=REDIS_URL, STATE_FRESH_SECONDS=1)
    second = start_gateway(sim.url, REDIS_URL=REDIS_URL, STATE_FRESH_SECONDS=1)
    _until(
        lambda: all(w.runtime.clients.cache.local is not None for w in (first, second)),
        "client list not loaded",
    )
    sim.state.set_client_fields(202, {"estado": "Activo"})
    time.sleep(1.2)
    sim.state.reset_stats()
    assert first.get("/api/v1/clients/202/account").json()["data"]["service_state"] == "active"
    assert sim.state.calls["GET /api/clientes/"] == 1
    # The fresh row went to the shared patch log: the other worker answers from it.
    assert second.get("/api/v1/clients/202/account").json()["data"]["service_state"] == "active"
    assert sim.state.calls["GET /api/clientes/"] == 1
