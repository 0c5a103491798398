"""Outage notices across workers and restarts on one Redis (OUTAGES.md 3, 5): one event per
flip whatever the number of workers, no second announcement after a restart, and a notice
queued before a restart delivered after it."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import (
    Simulator,
    StartGateway,
    StartSimulator,
    _start_gateway,
    serve_env,
)
from tests.outages.conftest import (
    ON_7,
    Bot,
    Hooks,
    clear_outage,
    flip_twice,
    notice_settings,
    raise_outage,
    verified,
    watching,
)
from tests.support import serving_workers

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
