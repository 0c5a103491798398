"""An empty router catalogue after a whole one that listed routers is a failed read
(CALLERS.md 2: "an empty page ... never published"): no outage ends, nothing is announced
again when the catalogue comes back, and no reader takes it for "no outages" (`/outages` and
diagnose answer 502); one WARNING line per episode, and the catalogue's age goes on growing
in the metrics."""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Gateway, Simulator, StartGateway, _start_gateway
from tests.outages.conftest import (
    Bot,
    Hooks,
    clear_outage,
    notice_settings,
    raise_outage,
    seen,
    verified,
    watching,
)
from tests.support import wait_until

# With OUTAGE_CACHE_SECONDS=1 the catalogue is read about every 0.8 s and its copy leaves the
# store 2 s after its load: this long, the blank reads have replaced it had they been taken.
REDIS_DB = 12
BLANK_SECONDS = 4.0
SETTLE_SECONDS = 3.0
EMPTY = "router catalogue read empty"
TICKET = {
    "subject": "No Tiene Internet",
    "description": "Sin servicio desde la mañana",
    "service_id": 101,
    "zone_id": 1,
    "technician_id": 11,
}


def blank_catalogue(sim: Simulator, blank: str | None) -> None:
    """The routers' endpoint answers 200 with no rows (`[]` or a page counting 0), or again
    the catalogue (None); the flags in the simulator do not change."""
    scopes = {"blank_list": {"path_prefix": "/api/router/"}}
    sim.state.faults.update({"blank_list": blank, "scopes": scopes})


def empty_warnings(caplog: pytest.LogCaptureFixture) -> int:
    return sum(EMPTY in r.getMessage() for r in caplog.records if r.levelname == "WARNING")


def routers_age(gw: Gateway) -> float:
    for family in text_string_to_metric_families(gw.client.get("/metrics").text):
        for sample in family.samples:
            if (sample.name, sample.labels) == (
                "isp_gateway_cache_age_seconds",
                {"resource": "routers"},
            ):
                return float(sample.value)
    raise AssertionError("no age of the router catalogue in /metrics")


def outage_ids(received: list[Any], secret: str) -> list[str]:
    """The outages the notices announce, as a receiver counts them: delivery is at least
    once (OUTAGES.md), so a notice sent again (a gateway stopped before it recorded the
    delivery) has the same webhook-id and is counted once; a new announcement has its own."""
    kept: dict[str, str] = {}
    for notice in received:
        kept.setdefault(notice.headers["webhook-id"], verified(notice, secret)["data"]["outage_id"])
    return list(kept.values())


@pytest.mark.parametrize("blank", ["bare", "paged"])
def test_an_empty_catalogue_ends_no_outage_and_none_is_announced_again(
    sim: Simulator,
    start_gateway: StartGateway,
    bot: Bot,
    hooks: Hooks,
    caplog: pytest.LogCaptureFixture,
    blank: str,
) -> None:
    receiver, secret = bot
    gw = watching(start_gateway(sim.url, **notice_settings(hooks, OUTAGE_TICKETS="hold")))
    raise_outage(sim, 7, "Corte de fibra")
    [first] = outage_ids(receiver.wait("outage.started"), secret)
    assert routers_age(gw) < BLANK_SECONDS  # scraped, as Prometheus does all along
    with caplog.at_level(logging.INFO, logger="isp_gateway.outages"):
        blank_catalogue(sim, blank)
        time.sleep(BLANK_SECONDS)  # sweeps that must not end the outage
        assert receiver.of("outage.ended") == []
        # Nobody reads the blank answer as "no outage".
        listed = gw.get("/api/v1/outages")
        assert listed.status_code == 502, listed.text
        assert listed.json()["action"] == "upstream_unavailable"
        diagnosed = gw.post("/api/v1/clients/101/diagnose", params={"wait": 0})
        assert diagnosed.status_code == 502, diagnosed.text
        # The outage stands: a ticket for a service under it is still held.
        held = gw.post("/api/v1/tickets", json=TICKET)
        assert (held.status_code, held.json()["action"]) == (409, "outage_in_progress")
        assert held.json()["data"]["outage_id"] == first
        # Said once however many sweeps read it, and the copy's age shows it.
        assert empty_warnings(caplog) == 1
        assert routers_age(gw) >= BLANK_SECONDS - 1

        blank_catalogue(sim, None)
        [again] = seen(gw)
        assert again["outage_id"] == first
        time.sleep(SETTLE_SECONDS)
    assert outage_ids(receiver.of("outage.started"), secret) == [first]
    assert receiver.of("outage.ended") == []
    assert any("whole again" in r.getMessage() for r in caplog.records)
    assert empty_warnings(caplog) == 1
    # A real end is still one: the same outage.
    clear_outage(sim, 7)
    assert outage_ids(receiver.wait("outage.ended"), secret) == [first]


def test_an_empty_catalogue_with_no_outage_is_no_answer_either(
    sim: Simulator, start_gateway: StartGateway
) -> None:
    """Before, `data: []` from a blank read looked like "all is well"."""
    gw = watching(start_gateway(sim.url, OUTAGE_CACHE_SECONDS=1))
    assert gw.get("/api/v1/outages").json()["data"] == []
    blank_catalogue(sim, "paged")
    time.sleep(BLANK_SECONDS)
    response = gw.get("/api/v1/outages")
    assert response.status_code == 502, response.text
    blank_catalogue(sim, None)
    wait_until(lambda: gw.get("/api/v1/outages").status_code == 200, timeout=10)


def test_a_restart_during_a_blank_episode_ends_nothing(
    sim: Simulator,
    bot: Bot,
    hooks: Hooks,
    shared_redis: str,
    password_hash: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """On Redis the last whole catalogue's size outlives the copy and the process: a worker
    that starts while the catalogue reads empty refuses it too (two workers: each says so
    once), and once it is whole the outage is the one already announced."""
    receiver, secret = bot
    settings = notice_settings(hooks, REDIS_URL=shared_redis)
    with contextlib.ExitStack() as stack:
        watching(_start_gateway(stack, password_hash, sim.url, **settings))
        raise_outage(sim, 8, "Mantenimiento")
        [first] = outage_ids(receiver.wait("outage.started"), secret)
    blank_catalogue(sim, "bare")
    with (
        caplog.at_level(logging.WARNING, logger="isp_gateway.outages"),
        contextlib.ExitStack() as stack,
    ):
        workers = [_start_gateway(stack, password_hash, sim.url, **settings) for _ in range(2)]
        time.sleep(BLANK_SECONDS)
        assert receiver.of("outage.ended") == []
        assert all(w.get("/api/v1/outages").status_code == 502 for w in workers)
        assert 1 <= empty_warnings(caplog) <= 2
        blank_catalogue(sim, None)
        assert [o["outage_id"] for o in seen(workers[0])] == [first]
        time.sleep(SETTLE_SECONDS)
    assert outage_ids(receiver.of("outage.started"), secret) == [first]
    assert receiver.of("outage.ended") == []
