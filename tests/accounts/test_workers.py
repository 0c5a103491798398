"""Two workers sharing a Redis store share the pending-invoice list and its loads."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import redis

from isp_gateway.upstream.clients import map_client
from tests.accounts.conftest import SECRETS, warm_invoices
from tests.clients.conftest import wait_for_list_age, warm
from tests.conftest import Simulator, StartGateway, StartSimulator
from tests.support import emptied_redis, wait_until

# A database of its own; only the keys of this module's gateways live there.
REDIS_DB = 10


class Shared(NamedTuple):
    """The account simulator, a client of the Redis database the workers share, and
    `start(**settings)`: a gateway worker on both."""

    sim: Simulator
    redis: redis.Redis
    start: StartGateway


@pytest.fixture
def shared(
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
    account_data: Path,
    redis_url: Callable[[int], str],
) -> Iterator[Shared]:
    url = redis_url(REDIS_DB)
    with emptied_redis(url, "ispgw:*") as client:
        sim = start_simulator(data_file=account_data)
        yield Shared(
            sim, client, lambda **settings: start_gateway(sim.url, REDIS_URL=url, **settings)
        )


def test_workers_share_one_pending_list_load(shared: Shared) -> None:
    sim = shared.sim
    first = shared.start(UPSTREAM_PAGE_SIZE=2)
    warm(first)
    warm_invoices(first)
    # One load: four pages of pending invoices, one of invoices in review.
    assert sim.state.calls["GET /api/facturas/"] == 5
    second = shared.start(UPSTREAM_PAGE_SIZE=2)
    # The second worker adopts the stored lists instead of loading them again.
    wait_until(
        lambda: second.runtime.services.accounts.invoices.local is not None,
        timeout=15,
        message="the second worker to adopt the list",
    )
    sim.state.reset_stats()
    for worker in (first, second):
        response = worker.get("/api/v1/clients/202/account")
        assert response.status_code == 200
        assert response.json()["data"]["total_due"] == 92501.5
    assert sim.state.calls["GET /api/facturas/"] == 0
    assert second.runtime.services.accounts.invoices.loads == 0
    # What the workers share holds no private field of the upstream rows either.
    for key in shared.redis.scan_iter(match="ispgw:*", count=500):
        value = shared.redis.get(key)
        if value is not None:
            assert not any(secret.encode() in value for secret in SECRETS.values()), key


def test_a_confirmation_on_one_worker_serves_the_other(shared: Shared) -> None:
    sim = shared.sim
    # 3 s: the second worker must read before the confirmed row ages, a margin a stalled
    # test process keeps.
    first = shared.start(STATE_FRESH_SECONDS=3)
    second = shared.start(STATE_FRESH_SECONDS=3)
    wait_until(
        lambda: all(w.runtime.services.clients.cache.local is not None for w in (first, second)),
        timeout=15,
        message="the client list to load",
    )
    sim.state.set_client_fields(202, {"estado": "Activo"})
    for worker in (first, second):
        wait_for_list_age(worker, 3)
    sim.state.reset_stats()
    assert first.get("/api/v1/clients/202/account").json()["data"]["service_state"] == "active"
    assert sim.state.calls["GET /api/clientes/"] == 1
    # The fresh row went to the shared patch log: the other worker answers from it.
    assert second.get("/api/v1/clients/202/account").json()["data"]["service_state"] == "active"
    assert sim.state.calls["GET /api/clientes/"] == 1


def test_a_client_list_cached_by_an_older_release_still_answers(
    shared: Shared, account_data: Path
) -> None:
    # The shared store outlives a deploy: its cached records lack the new extras.
    old: list[dict[str, Any]] = []
    for row in json.loads(account_data.read_text("utf-8"))["clients"]:
        record = map_client(row)
        assert record is not None
        client = {k: v for k, v in record["client"].items() if k != "service_state"}
        old.append({"client": client, "plan_id": record["plan_id"]})
    now = time.time()
    shared.redis.set(
        "ispgw:cache:clients", json.dumps({"loaded_at": now, "value": {"records": old}}), px=600_000
    )
    shared.redis.set("ispgw:cache:clients:at", json.dumps({"at": now, "rev": 0}), px=600_000)
    gw = shared.start()
    wait_until(
        lambda: gw.runtime.services.clients.cache.local is not None,
        timeout=15,
        message="the old copy to be adopted",
    )
    assert gw.runtime.services.clients.cache.loads == 0  # the old copy serves
    found = gw.get("/api/v1/clients/by-service-id/202").json()["data"]
    assert found["service_state"] == "suspended"
    account = gw.get("/api/v1/clients/202/account")
    # No username in the old copy: the balance cannot be confirmed (never "owes nothing").
    assert (account.status_code, account.json()["action"]) == (502, "upstream_unavailable")
