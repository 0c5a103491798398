"""Outage notices end to end (OUTAGES.md 2-3): a flag raised or cleared in the simulator,
the real gateway with its lifespan, receivers on loopback, the standardwebhooks verifier."""

from __future__ import annotations

import re
import time

import httpx

from tests.conftest import Simulator, StartGateway
from tests.outages.conftest import (
    ON_7,
    ZONES_7,
    Bot,
    Hooks,
    StartReceiver,
    clear_outage,
    notice_settings,
    raise_outage,
    verified,
    watching,
)
from tests.support import wait_until

SETTLE_SECONDS = 3.0  # longer than several sweeps and sender ticks: a second event would show


def test_a_raised_flag_gives_one_signed_started_notice_then_one_ended(
    sim: Simulator, start_gateway: StartGateway, bot: Bot, hooks: Hooks
) -> None:
    receiver, secret = bot
    gw = watching(start_gateway(sim.url, **notice_settings(hooks, OUTAGE_CACHE_SECONDS=2)))
    assert gw.get("/api/v1/outages").json()["data"] == []
    raised = time.monotonic()
    raise_outage(sim, 7, "Corte de fibra en la troncal; reparación hoy 18:00")
    [started] = receiver.wait("outage.started", timeout=2 + 10)
    assert started.at - raised <= 2 + 10
    event = verified(started, secret)
    data = event["data"]
    assert event["type"] == "outage.started"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", event["timestamp"])
    assert data["router_id"] == 7 and data["router_name"] == "MK-NORTE"
    assert data["description"] == "Corte de fibra en la troncal; reparación hoy 18:00"
    assert (data["service_ids"], data["zone_ids"], data["affected_count"]) == (ON_7, ZONES_7, 3)
    assert data["started_at"] == event["timestamp"]
    assert data["message"] == (
        "Hay una falla general en su sector: Corte de fibra en la troncal; reparación hoy "
        "18:00. Estamos trabajando en ello."
    )
    assert started.headers["webhook-id"] == f"msg_{data['outage_id']}_started"
    # /outages shows it with the same id.
    listed = gw.get("/api/v1/outages").json()
    assert (listed["ok"], listed["type"], listed["action"]) == (True, "success", "outages_listed")
    assert listed["data"] == [
        {
            "outage_id": data["outage_id"],
            "router_id": 7,
            "router_name": "MK-NORTE",
            "description": data["description"],
            "since": data["started_at"],
            "zone_ids": ZONES_7,
            "affected_count": 3,
        }
    ]
    time.sleep(SETTLE_SECONDS)
    assert len(receiver.of("outage.started")) == 1  # one event per flip, however many sweeps

    clear_outage(sim, 7)
    [ended] = receiver.wait("outage.ended", timeout=2 + 10)
    done = verified(ended, secret)["data"]
    assert done["outage_id"] == data["outage_id"]
    assert done["ended_at"] >= done["started_at"]
    assert done["duration_seconds"] >= 0
    assert done["message"].startswith("Ya se solucionó la falla general en su sector.")
    assert ended.headers["webhook-id"] == f"msg_{data['outage_id']}_ended"
    time.sleep(SETTLE_SECONDS)
    assert len(receiver.of("outage.ended")) == 1 and len(receiver.of("outage.started")) == 1
    assert gw.get("/api/v1/outages").json()["data"] == []
    # Each flip is audited once, by nobody's request.
    audit = gw.get("/api/v1/audit", params={"event": "outage"}).json()["data"]
    assert [e["outcome"] for e in audit] == ["ended", "started"]
    for entry in audit:
        assert (entry["caller"], entry["request_id"]) == (None, None)
        assert entry["details"]["router_id"] == 7 and entry["details"]["affected_count"] == 3
        assert entry["details"]["notices"] == 1


def test_a_receiver_answering_500_twice_gets_the_notice_a_third_time_with_the_same_id(
    sim: Simulator, start_gateway: StartGateway, bot: Bot, hooks: Hooks
) -> None:
    receiver, secret = bot
    receiver.answers = [500, 500]
    gw = watching(start_gateway(sim.url, **notice_settings(hooks)))
    raise_outage(sim, 8, "Mantenimiento")
    attempts = receiver.wait("outage.started", 3)
    assert len({a.headers["webhook-id"] for a in attempts}) == 1
    for attempt in attempts:
        verified(attempt, secret)  # each attempt signed anew, each accepted
    assert [a.body for a in attempts] == [attempts[0].body] * 3
    time.sleep(SETTLE_SECONDS)
    assert len(receiver.of("outage.started")) == 3  # delivered on the third: no fourth
    metrics = gw.get("/metrics").text
    assert 'isp_gateway_webhook_deliveries_total{outcome="failed"} 2.0' in metrics
    assert 'isp_gateway_webhook_deliveries_total{outcome="delivered"} 1.0' in metrics
    assert "isp_gateway_webhook_queue_age_seconds 0.0" in metrics


def test_a_hanging_receiver_delays_neither_the_api_nor_another_receiver(
    sim: Simulator, start_gateway: StartGateway, start_receiver: StartReceiver, hooks: Hooks
) -> None:
    slow, fast = start_receiver(), start_receiver()
    slow.hang = True
    hooks.add("slow", slow.url)
    hooks.add("fast", fast.url)
    gw = watching(start_gateway(sim.url, **notice_settings(hooks)))
    raise_outage(sim, 7)
    slow.wait("outage.started")  # it has the first attempt, and holds it
    fast.wait("outage.started", timeout=5)
    clear_outage(sim, 7)
    fast.wait("outage.ended", timeout=8)  # the slow one's backlog holds nothing of its
    if time.monotonic() - slow.received[0].at < 9:
        assert slow.of("outage.ended") == []  # still inside its first attempt
    for path in ("/health", "/api/v1/outages", "/api/v1/clients/by-service-id/101"):
        started = time.monotonic()
        assert gw.get(path).status_code == 200
        assert time.monotonic() - started < 2.0, path  # the hung attempt lasts 10 s
    # The first attempt times out at 10 s; the notice is tried again, not lost. A receiver
    # records a notice before it answers, so the sender counts the delivery a little later.
    delivered = 'isp_gateway_webhook_deliveries_total{outcome="delivered"} 2.0'
    wait_until(
        lambda: delivered in httpx.get(f"{gw.url}/metrics").text, message="both deliveries counted"
    )


def test_a_removed_subscription_gets_nothing_after_5_s_and_an_added_one_without_restart(
    sim: Simulator, start_gateway: StartGateway, start_receiver: StartReceiver, hooks: Hooks
) -> None:
    kept, removed, added = start_receiver(), start_receiver(), start_receiver()
    hooks.add("kept", kept.url)
    hooks.add("removed", removed.url)
    watching(start_gateway(sim.url, **notice_settings(hooks)))
    hooks.remove("removed")
    secret = hooks.add("added", added.url, ["outage.started"])
    time.sleep(5)
    raise_outage(sim, 7)
    kept.wait("outage.started")
    verified(added.wait("outage.started")[0], secret)
    clear_outage(sim, 7)
    kept.wait("outage.ended")
    time.sleep(SETTLE_SECONDS)
    assert removed.received == []
    assert added.of("outage.ended") == []  # it asked for outage.started only
