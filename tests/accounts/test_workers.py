"""Two workers sharing a Redis store share the pending-invoice list and its loads."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from isp_gateway.upstream.clients import map_client
from tests.accounts.conftest import SECRETS, warm_invoices
from tests.clients.conftest import warm
from tests.conftest import Gateway, Simulator
from tests.support import emptied_redis

# A database of its own; only the keys of this module's gateways live there.
REDIS_DB = 10


def _until(condition: Callable[[], bool], what: str, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.fixture
def redis_db_url(redis_url: Callable[[int], str]) -> str:
    return redis_url(REDIS_DB)


@pytest.fixture
def shared_redis(redis_db_url: str) -> Iterator[redis.Redis]:
    with emptied_redis(redis_db_url, "ispgw:*") as client:
        yield client


def test_workers_share_one_pending_list_load(
    start_simulator: Callable[..., Simulator],
    start_gateway: Callable[..., Gateway],
    account_data: Path,
    shared_redis: redis.Redis,
    redis_db_url: str,
) -> None:
    sim = start_simulator(data_file=account_data)
    first = start_gateway(sim.url, REDIS_URL=redis_db_url, UPSTREAM_PAGE_SIZE=2)
    warm(first)
    warm_invoices(first)
    assert sim.state.calls["GET /api/facturas/"] == 4  # one load of four pages
    second = start_gateway(sim.url, REDIS_URL=redis_db_url, UPSTREAM_PAGE_SIZE=2)
    # The second worker adopts the stored lists instead of loading them again.
    _until(
        lambda: second.runtime.services.accounts.invoices.local is not None,
        "the second worker did not adopt the list",
    )
    sim.state.reset_stats()
    for worker in (first, second):
        response = worker.get("/api/v1/clients/202/account")
        assert response.status_code == 200
        assert response.json()["data"]["total_due"] == 92501.5
    assert sim.state.calls["GET /api/facturas/"] == 0
    assert second.runtime.services.accounts.invoices.loads == 0
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
    redis_db_url: str,
) -> None:
    sim = start_simulator(data_file=account_data)
    first = start_gateway(sim.url, REDIS_URL=redis_db_url, STATE_FRESH_SECONDS=1)
    second = start_gateway(sim.url, REDIS_URL=redis_db_url, STATE_FRESH_SECONDS=1)
    _until(
        lambda: all(w.runtime.services.clients.cache.local is not None for w in (first, second)),
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


def test_a_client_list_cached_by_an_older_release_still_answers(
    start_simulator: Callable[..., Simulator],
    start_gateway: Callable[..., Gateway],
    account_data: Path,
    shared_redis: redis.Redis,
    redis_db_url: str,
) -> None:
    # The shared store outlives a deploy: its cached records lack the new extras.
    sim = start_simulator(data_file=account_data)
    old: list[dict[str, Any]] = []
    for row in json.loads(account_data.read_text("utf-8"))["clients"]:
        record = map_client(row)
        assert record is not None
        client = {k: v for k, v in record["client"].items() if k != "service_state"}
        old.append({"client": client, "plan_id": record["plan_id"]})
    now = time.time()
    shared_redis.set(
        "ispgw:cache:clients", json.dumps({"loaded_at": now, "value": {"records": old}}), px=600_000
    )
    shared_redis.set("ispgw:cache:clients:at", json.dumps({"at": now, "rev": 0}), px=600_000)
    gw = start_gateway(sim.url, REDIS_URL=redis_db_url)
    _until(
        lambda: gw.runtime.services.clients.cache.local is not None, "the old copy was not adopted"
    )
    assert gw.runtime.services.clients.cache.loads == 0  # the old copy serves
    found = gw.get("/api/v1/clients/by-service-id/202").json()["data"]
    assert found["service_state"] == "suspended"
    account = gw.get("/api/v1/clients/202/account")
    # No username in the old copy: the balance cannot be confirmed (never "owes nothing").
    assert (account.status_code, account.json()["action"]) == (502, "upstream_unavailable")
