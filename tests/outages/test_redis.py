"""Outage notices across workers and restarts on one Redis (OUTAGES.md 3, 5): one event per
flip whatever the number of workers, no second announcement after a restart, and a notice
queued before a restart delivered after it."""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path

import httpx
import pytest
import redis

from isp_gateway.outages.detector import LEASE_KEY
from isp_gateway.store.redis import PREFIX
from tests.conftest import (
    Gateway,
    Simulator,
    StartGateway,
    StartSimulator,
    _start_gateway,
    serve_env,
)
from tests.outages.conftest import (
    ON_7,
    ROUTERS,
    Bot,
    Hooks,
    Receiver,
    build_dataset,
    clear_outage,
    flip_twice,
    notice_settings,
    raise_outage,
    verified,
    watching,
)
from tests.support import data_file_of, serving_workers, wait_until

REDIS_DB = 1
SETTLE_SECONDS = 3.0


def test_two_workers_on_redis_give_exactly_one_event_per_flip(
    sim: Simulator,
    start_gateway: StartGateway,
    bot: Bot,
    hooks: Hooks,
    shared_redis: str,
) -> None:
    receiver, secret = bot
    settings = notice_settings(hooks, REDIS_URL=shared_redis)
    workers = [watching(start_gateway(sim.url, **settings)) for _ in range(2)]
    flip_twice(sim, 7, receiver)
    time.sleep(SETTLE_SECONDS)
    started, ended = receiver.of("outage.started"), receiver.of("outage.ended")
    assert len(started) == 2 and len(ended) == 2
    ids = [verified(r, secret)["data"]["outage_id"] for r in started]
    assert ids == [verified(r, secret)["data"]["outage_id"] for r in ended]
    assert len(set(ids)) == 2  # two outages, two ids
    # Both workers compared the catalogue; the flips were announced once between them.
    detectors = [w.runtime.services.outages.detector for w in workers]
    assert sum(d.flips for d in detectors) == 4
    assert all(d.compared_at > 0 for d in detectors)
    senders = [d.notices.sender for d in detectors]
    assert sum(s.leading for s in senders) == 1


def test_serve_with_two_workers_on_redis_sends_one_notice_per_flip(
    sim: Simulator,
    bot: Bot,
    hooks: Hooks,
    shared_redis: str,
    password_hash: str,
    tmp_path: Path,
) -> None:
    """`isp-gateway serve --workers 2` as a real process: each worker compares the catalogue
    and could send; a flip is still one notice."""
    receiver, secret = bot
    settings = notice_settings(hooks, REDIS_URL=shared_redis)
    env = serve_env(sim.url, password_hash, **{k: str(v) for k, v in settings.items()})
    with serving_workers(env, tmp_path, "/ready") as url:
        time.sleep(3)  # both workers have compared the catalogue
        flip_twice(sim, 8, receiver)
        time.sleep(SETTLE_SECONDS)
        metrics = httpx.get(f"{url}/metrics").text
    assert len(receiver.of("outage.started")) == 2 and len(receiver.of("outage.ended")) == 2
    for received in receiver.received:
        assert verified(received, secret)["data"]["router_id"] == 8
    assert 'isp_gateway_webhook_deliveries_total{outcome="delivered"} 4.0' in metrics


def test_a_restart_during_an_outage_does_not_announce_it_again(
    start_simulator: StartSimulator,
    data_file: object,
    bot: Bot,
    hooks: Hooks,
    shared_redis: str,
    password_hash: str,
) -> None:
    # Flagged before the gateway's first start (no known state): announced once.
    sim = start_simulator(data_file=data_file, outages={7: "Corte de fibra"})
    receiver, secret = bot
    settings = notice_settings(hooks, REDIS_URL=shared_redis)
    with contextlib.ExitStack() as stack:
        first = watching(_start_gateway(stack, password_hash, sim.url, **settings))
        [announced] = receiver.wait("outage.started")
        data = verified(announced, secret)["data"]
        assert data["service_ids"] == ON_7
        [listed] = first.get("/api/v1/outages").json()["data"]
    with contextlib.ExitStack() as stack:
        again = watching(_start_gateway(stack, password_hash, sim.url, **settings))
        time.sleep(SETTLE_SECONDS)
        assert len(receiver.of("outage.started")) == 1
        assert again.get("/api/v1/outages").json()["data"] == [listed]
        assert listed["outage_id"] == data["outage_id"]
        clear_outage(sim, 7)
        [ended] = receiver.wait("outage.ended")
        assert verified(ended, secret)["data"]["outage_id"] == data["outage_id"]


def test_a_notice_queued_before_a_restart_is_delivered_after_it(
    sim: Simulator,
    bot: Bot,
    hooks: Hooks,
    shared_redis: str,
    password_hash: str,
) -> None:
    receiver, secret = bot
    receiver.answers = [503] * 1000  # down for the whole first run
    settings = notice_settings(hooks, REDIS_URL=shared_redis)
    with contextlib.ExitStack() as stack:
        watching(_start_gateway(stack, password_hash, sim.url, **settings))
        raise_outage(sim, 8, "Mantenimiento")
        receiver.wait("outage.started", 2)  # tried, refused, tried again: queued
    refused = {r.headers["webhook-id"] for r in receiver.of("outage.started")}
    receiver.answers = []  # back up
    tried = len(receiver.received)
    with contextlib.ExitStack() as stack:
        watching(_start_gateway(stack, password_hash, sim.url, **settings))
        attempts = receiver.wait("outage.started", tried + 1)
        time.sleep(SETTLE_SECONDS)
        after = receiver.of("outage.started")[tried:]
    assert len(after) == 1 and after[0] is attempts[-1]  # delivered once, not announced anew
    assert {after[0].headers["webhook-id"]} == refused
    assert verified(after[0], secret)["data"]["router_id"] == 8


def test_a_notice_never_accepted_is_dropped_with_an_error_and_an_audit_event(
    sim: Simulator,
    start_gateway: StartGateway,
    bot: Bot,
    hooks: Hooks,
    shared_redis: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    receiver, _ = bot
    receiver.answers = [500] * 1000
    settings = notice_settings(
        hooks, REDIS_URL=shared_redis, WEBHOOKS_RETRY_SECONDS="0.2", WEBHOOKS_GIVE_UP_SECONDS=1
    )
    gw = watching(start_gateway(sim.url, **settings))
    raise_outage(sim, 7)
    deadline = time.monotonic() + 15
    while True:
        audit = gw.get("/api/v1/audit", params={"event": "webhook"}).json()["data"]
        if audit:
            break
        assert time.monotonic() < deadline, "the notice was never dropped"
        time.sleep(0.1)
    [dropped] = audit
    assert dropped["outcome"] == "dropped"
    assert dropped["details"]["webhook"] == "bot"
    assert dropped["details"]["event_type"] == "outage.started"
    attempts = dropped["details"]["attempts"]
    assert attempts >= 3 and attempts == len(receiver.of("outage.started"))
    assert any(r.levelname == "ERROR" and "dropped after" in r.getMessage() for r in caplog.records)
    metrics = gw.get("/metrics").text
    assert 'isp_gateway_webhook_deliveries_total{outcome="dropped"} 1.0' in metrics
    time.sleep(1)
    assert len(receiver.of("outage.started")) == attempts  # nothing after the drop


# -- a slow comparison (the client list does not come) ---------------------------------------

# Routers flagged before the first start, more than one comparison's worth of waiting: each
# used to wait up to 20 s for the client list while holding a 60 s lock, so the other worker
# compared again and announced them all a second time, under new ids.
SLOW_ROUTERS = range(7, 15)
# One comparison waits at most this long for the client list (CLIENTS_WAIT_SECONDS), once.
CLIENTS_WAIT = 20.0


def slow_start(start_simulator: StartSimulator, tmp_path: Path) -> Simulator:
    """A simulator whose routers 7-14 are flagged from the start and whose client list never
    comes (its reads hang)."""
    dataset = build_dataset()
    dataset["routers"] = [*ROUTERS, *({"id": n, "nombre": f"MK-{n}"} for n in SLOW_ROUTERS[2:])]
    sim = start_simulator(
        data_file=data_file_of(tmp_path / "slow.json", dataset),
        outages={n: f"Corte {n}" for n in SLOW_ROUTERS},
    )
    sim.state.faults.update(
        {"hang_rate": 1.0, "scopes": {"hang_rate": {"path_prefix": "/api/clientes/"}}}
    )
    return sim


def started_ids(receiver: Receiver, secret: str) -> dict[int, list[str]]:
    ids: dict[int, list[str]] = {}
    for received in receiver.of("outage.started"):
        data = verified(received, secret)["data"]
        ids.setdefault(data["router_id"], []).append(data["outage_id"])
    return ids


def listed_ids(gw: Gateway) -> dict[int, str]:
    return {o["router_id"]: o["outage_id"] for o in gw.get("/api/v1/outages").json()["data"]}


def test_a_slow_first_comparison_is_announced_once_by_one_of_two_workers(
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
    bot: Bot,
    hooks: Hooks,
    shared_redis: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two workers on one Redis, eight routers flagged at the first start, the client list
    hanging: one comparison (past its 15 s lease, renewed) announces each outage once, within
    one wait for the client list, and the other worker never compares meanwhile."""
    sim = slow_start(start_simulator, tmp_path)
    receiver, secret = bot
    # A client list read that goes on (no timeout): the comparison waits its whole 20 s.
    settings = notice_settings(hooks, REDIS_URL=shared_redis, UPSTREAM_TIMEOUT_SECONDS=60)
    with caplog.at_level(logging.WARNING, logger="isp_gateway.outages"):
        workers = [start_gateway(sim.url, **settings) for _ in range(2)]
        receiver.wait("outage.started", len(SLOW_ROUTERS), timeout=CLIENTS_WAIT + 15)
        time.sleep(SETTLE_SECONDS)
    ids = started_ids(receiver, secret)
    assert sorted(ids) == list(SLOW_ROUTERS)
    assert all(len(announced) == 1 for announced in ids.values()), ids
    once = {router: announced[0] for router, announced in ids.items()}
    assert all(listed_ids(w) == once for w in workers)
    assert sorted(w.runtime.services.outages.detector.flips for w in workers) == [0, 8]
    assert not [r for r in caplog.records if "comparison dropped" in r.getMessage()]
    # Announced with their services unknown (the list never came), and said so per router.
    unknown = [r for r in caplog.records if "its services are unknown" in r.getMessage()]
    assert len(unknown) == len(SLOW_ROUTERS)


def test_a_worker_that_lost_the_lease_while_comparing_publishes_nothing(
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
    bot: Bot,
    hooks: Hooks,
    shared_redis: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A worker's comparison waits for the client list; its lease goes (as a Redis failover
    that lost the key would have it) and a second worker compares a newer copy of the
    catalogue. The first one finds the lease another's before it publishes and drops its
    work: each outage is announced once, under the second worker's ids."""
    sim = slow_start(start_simulator, tmp_path)
    receiver, secret = bot
    settings = notice_settings(hooks, REDIS_URL=shared_redis, UPSTREAM_TIMEOUT_SECONDS=60)
    store = redis.Redis.from_url(shared_redis)
    lease = f"{PREFIX}{LEASE_KEY}"
    with caplog.at_level(logging.WARNING, logger="isp_gateway.outages"):
        first = start_gateway(sim.url, **settings)
        held = wait_until(lambda: store.get(lease), timeout=15, message="a comparison's lease")
        time.sleep(1.5)  # the second worker's copy of the catalogue is a newer one
        # The second worker waits for the lease (asking every 0.1 s) while the first one,
        # still comparing, renews it (every 5 s).
        second = start_gateway(sim.url, **settings)
        time.sleep(1.5)
        assert store.get(lease) == held

        def taken_over() -> bool:
            holder = store.get(lease)
            if holder == held:  # the first one's still (or again: renewed in between)
                store.delete(lease)
            return holder not in (held, None)

        wait_until(taken_over, timeout=10, interval=0.2, message="the second worker's lease")
        receiver.wait("outage.started", len(SLOW_ROUTERS), timeout=CLIENTS_WAIT + 15)
        wait_until(
            lambda: [r for r in caplog.records if "comparison dropped" in r.getMessage()],
            timeout=CLIENTS_WAIT,
        )
        time.sleep(SETTLE_SECONDS)
    ids = started_ids(receiver, secret)
    assert all(len(announced) == 1 for announced in ids.values()), ids
    assert sorted(ids) == list(SLOW_ROUTERS)
    once = {router: announced[0] for router, announced in ids.items()}
    assert listed_ids(first) == listed_ids(second) == once
    detectors = [gw.runtime.services.outages.detector for gw in (first, second)]
    assert [d.flips for d in detectors] == [0, 8]
