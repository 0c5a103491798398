"""Plan endpoints over loopback against the simulator (spec 4.14-4.15, DECISIONS.md)."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from isp_gateway.app import create_app
from isp_gateway.kit.errors import UpstreamUnavailable
from tests.conftest import Gateway, Simulator, StartGateway, StartSimulator, gateway_settings
from tests.support import wait_for_age, wait_until

LIST = "GET /api/plan-internet/"
PPPOE = "GET /api/plan-internet/pppoe/{id}/"
QUEUE = "GET /api/plan-internet/queue/{id}/"


def data_file(tmp_path: Path, plans: list[dict[str, Any]]) -> Path:
    path = tmp_path / "data.json"
    clients = [{"id_servicio": 1, "nombre": "ANA"}]
    path.write_text(json.dumps({"clients": clients, "plans": plans}), "utf-8")
    return path


def test_list(gateway: Gateway, simulator: Simulator) -> None:
    response = gateway.get("/api/v1/internet-plans/")
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is True and body["type"] == "success"
    assert body["action"] == "internet_plans_listed" and body["meta"] is None
    expected = [
        {"plan_id": int(p["id"]), "name": p["nombre"], "type": p["tipo"]}
        for p in simulator.state.dataset.plans
    ]
    assert body["data"] == expected
    assert {p["type"] for p in body["data"]} == {"PPPOE", "SIMPLE QUEUE", "PCQ"}
    # Without the trailing slash: the same answer, no redirect.
    again = gateway.get("/api/v1/internet-plans")
    assert again.status_code == 200 and again.json()["data"] == expected


def test_list_is_protected(gateway: Gateway) -> None:
    response = gateway.client.get("/api/v1/internet-plans/")
    assert response.status_code == 401
    assert response.json() == {"detail": "Could not validate credentials."}


def test_no_plans_is_internet_plan_not_found(
    tmp_path: Path,
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
) -> None:
    sim = start_simulator(data_file=data_file(tmp_path, []))
    gw = start_gateway(sim.url)
    response = gw.get("/api/v1/internet-plans/")
    assert response.status_code == 200
    body = response.json()
    assert body["action"] == "internet_plan_not_found" and body["data"] is None


PLAN_FIELDS = ("plan_id", "name", "type", "price", "download_speed", "upload_speed")


def plan(*values: Any) -> dict[str, Any]:
    """A plan's detail as the API answers it, from its values in PLAN_FIELDS' order."""
    return dict(zip(PLAN_FIELDS, values, strict=True))


def test_pppoe_detail(gateway: Gateway, simulator: Simulator) -> None:
    response = gateway.get("/api/v1/internet-plans/2")
    assert response.status_code == 200
    body = response.json()
    assert body["action"] == "internet_plan_found" and body["ok"] is True
    assert body["data"] == plan(2, "PLAN 10MB", "PPPOE", 40000.0, 10, 2)
    assert simulator.state.calls[PPPOE] == 1 and simulator.state.calls[QUEUE] == 0


def test_simple_queue_detail(gateway: Gateway, simulator: Simulator) -> None:
    response = gateway.get("/api/v1/internet-plans/7/")
    assert response.status_code == 200
    assert response.json()["data"] == plan(7, "QUEUE 15MB", "SIMPLE QUEUE", 48000.0, 15, 3)
    assert simulator.state.calls[QUEUE] == 1 and simulator.state.calls[PPPOE] == 0


def test_pcq_has_basic_information_only(gateway: Gateway, simulator: Simulator) -> None:
    response = gateway.get("/api/v1/internet-plans/10")
    assert response.status_code == 200
    body = response.json()
    assert body["action"] == "internet_plan_found"
    assert body["data"] == plan(10, "PCQ 4MB", "PCQ", None, None, None)
    assert "PCQ" in body["message"]
    assert simulator.state.calls[PPPOE] + simulator.state.calls[QUEUE] == 0


def test_unknown_plan_is_404(gateway: Gateway) -> None:
    response = gateway.get("/api/v1/internet-plans/999")
    assert response.status_code == 404
    body = response.json()
    assert body["ok"] is False and body["action"] == "internet_plan_not_found"
    assert body["data"] is None
    assert gateway.get("/api/v1/internet-plans/abc").status_code == 422


def test_speeds_and_prices_as_numbers(
    tmp_path: Path,
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
) -> None:
    plans = [
        {"id": 1, "nombre": "A", "tipo": "PPPOE", "precio": "40000.00", "bajada": "20",
         "subida": "512k"},
        {"id": 2, "nombre": "B", "tipo": "SIMPLE QUEUE", "precio": "", "bajada": "rapido",
         "subida": ""},
    ]  # fmt: skip
    sim = start_simulator(data_file=data_file(tmp_path, plans))
    gw = start_gateway(sim.url)
    first = gw.get("/api/v1/internet-plans/1").json()["data"]
    assert (first["price"], first["download_speed"], first["upload_speed"]) == (40000.0, 20, 0.5)
    second = gw.get("/api/v1/internet-plans/2").json()["data"]
    assert (second["price"], second["download_speed"], second["upload_speed"]) == (None,) * 3


def test_list_and_details_are_cached_single_flight(
    start_simulator: StartSimulator, start_gateway: StartGateway
) -> None:
    sim = start_simulator()
    sim.state.faults.update({"latency": 0.3})  # slow upstream: requests overlap the load
    gw = start_gateway(sim.url)
    with ThreadPoolExecutor(8) as pool:
        lists = list(pool.map(lambda _: gw.get("/api/v1/internet-plans/"), range(8)))
        details = list(pool.map(lambda _: gw.get("/api/v1/internet-plans/3"), range(8)))
    assert all(r.status_code == 200 for r in lists + details)
    assert all(r.json()["data"]["price"] == 55000.0 for r in details)
    for _ in range(5):
        gw.get("/api/v1/internet-plans/")
        gw.get("/api/v1/internet-plans/3")
    assert sim.state.calls[LIST] == 1
    assert sim.state.calls[PPPOE] == 1


def test_refresh_ahead_keeps_the_list_fresh(
    start_simulator: StartSimulator, start_gateway: StartGateway
) -> None:
    sim = start_simulator()
    # A 5 s lifetime: the reload at 4 s has 1 s to publish before an answer would be stale,
    # a margin a stalled test process (a busy core, a full collection) keeps.
    gw = start_gateway(sim.url, PLAN_CACHE_SECONDS=5)
    assert gw.get("/api/v1/internet-plans/").json()["action"] == "internet_plans_listed"
    sim.state.dataset.plans.append({"id": 50, "nombre": "NUEVO 200MB", "tipo": "PCQ"})
    newest = {"plan_id": 50, "name": "NUEVO 200MB", "type": "PCQ"}

    def sees_new_plan() -> bool:
        # The periodic job reloads at 80 % of the ttl: every answer meanwhile is fresh, and
        # the new plan shows up by itself. (Not timed: the simulator answers at once, so a
        # request that waited for the reload would be as quick as one that did not.)
        body = gw.get("/api/v1/internet-plans/").json()
        assert body["meta"] is None
        return bool(body["data"][-1] == newest)

    wait_until(sees_new_plan, timeout=10, message="the new plan")
    assert sim.state.calls[LIST] >= 2


def test_stale_if_error(start_simulator: StartSimulator, start_gateway: StartGateway) -> None:
    sim = start_simulator()
    # The failing refresh retries its page in the background, 2, 4 and 8 s apart by default;
    # short waits let it see the upstream back sooner, and the outcome is the same.
    gw = start_gateway(
        sim.url, PLAN_CACHE_SECONDS=1, STALE_IF_ERROR_SECONDS=3600, UPSTREAM_PAGE_RETRY_SECONDS=0.05
    )
    fresh = gw.get("/api/v1/internet-plans/").json()
    detail = gw.get("/api/v1/internet-plans/2").json()
    sim.state.faults.update({"error_rate": 1.0, "path_prefix": "/api/plan-internet/"})
    wait_for_age(gw.runtime.services.plans.catalogue, 1)  # past its lifetime, refreshes failing
    failed_before = sim.state.calls[LIST]
    stale = gw.get("/api/v1/internet-plans/")
    assert stale.status_code == 200
    assert stale.json()["data"] == fresh["data"]
    assert stale.json()["meta"] == {"stale": True}
    stale_detail = gw.get("/api/v1/internet-plans/2")
    assert stale_detail.status_code == 200
    assert stale_detail.json()["data"] == detail["data"]
    assert stale_detail.json()["meta"] == {"stale": True}
    # The upstream was really asked (and failed) while the old copy was served.
    wait_until(lambda: sim.state.calls[LIST] > failed_before, timeout=5)
    sim.state.faults.update({"reset": True})
    wait_until(lambda: gw.get("/api/v1/internet-plans/").json()["meta"] is None, timeout=5)


def test_upstream_failure_without_a_copy_is_502(
    start_simulator: StartSimulator, start_gateway: StartGateway
) -> None:
    sim = start_simulator()
    sim.state.faults.update({"error_rate": 1.0, "path_prefix": "/api/plan-internet/"})
    # The list request joins the start-up load, whose failing page is retried in the
    # background before it gives up: short waits between those attempts (default 2, 4, 8 s).
    gw = start_gateway(sim.url, UPSTREAM_PAGE_RETRY_SECONDS=0.05)
    for path in ("/api/v1/internet-plans/", "/api/v1/internet-plans/2"):
        response = gw.get(path)
        assert response.status_code == 502
        body = response.json()
        assert body["action"] == "upstream_unavailable" and body["data"] is None
    # The list is fine but a detail read fails: 502 too, never a 404.
    sim.state.faults.update({"reset": True})
    assert gw.get("/api/v1/internet-plans/").status_code == 200
    sim.state.faults.update({"error_rate": 1.0, "path_prefix": "/api/plan-internet/pppoe/"})
    response = gw.get("/api/v1/internet-plans/2")
    assert response.status_code == 502 and response.json()["action"] == "upstream_unavailable"


def test_a_new_plan_is_found_on_a_miss(
    start_simulator: StartSimulator, start_gateway: StartGateway
) -> None:
    sim = start_simulator()
    gw = start_gateway(sim.url, NEGATIVE_CACHE_SECONDS=0)
    assert gw.get("/api/v1/internet-plans/").status_code == 200
    sim.state.dataset.plans.append({"id": 51, "nombre": "NUEVO", "tipo": "PCQ"})
    response = gw.get("/api/v1/internet-plans/51")
    assert response.status_code == 200 and response.json()["data"]["name"] == "NUEVO"


@pytest.mark.anyio
async def test_price_for(simulator: Simulator, password_hash: str) -> None:
    app = create_app(gateway_settings(simulator.url, password_hash))
    async with app.router.lifespan_context(app):
        plans = app.state.runtime.services.plans
        assert await plans.price_for(2, None) == 40000.0
        assert await plans.price_for(7, "whatever") == 48000.0  # the id wins
        assert await plans.price_for(None, "plan 10mb") == 40000.0
        assert await plans.price_for(None, "  PLAN BÁSICO   8m ") == 38000.0
        assert await plans.price_for(999, "QUEUE 15MB") == 48000.0  # unknown id: by name
        assert await plans.price_for(10, None) is None  # PCQ: no detail upstream
        assert await plans.price_for(999, None) is None
        assert await plans.price_for(None, "plan") is None
        assert await plans.price_for(None, None) is None
        details_read = simulator.state.calls[PPPOE] + simulator.state.calls[QUEUE]
        assert await plans.price_for(2, None) == 40000.0  # cached detail
        assert simulator.state.calls[PPPOE] + simulator.state.calls[QUEUE] == details_read
        simulator.state.faults.update({"error_rate": 1.0, "path_prefix": "/api/plan-internet/"})
        with pytest.raises(UpstreamUnavailable):
            await plans.price_for(3, None)  # not cached: the caller decides what this means


@pytest.mark.parametrize(
    ("faults", "status", "action"),
    [
        # A backend that hangs: each page would time out and be asked again in the background.
        ({"hang_rate": 1.0, "hang_seconds": 60}, 502, "upstream_unavailable"),
        # A 429 asking for 30 s: more than the time left, answered at once.
        ({"force_429": True, "retry_after": 30}, 503, "upstream_rate_limited"),
    ],
)
def test_an_unknown_plan_id_answers_within_the_deadline(
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
    faults: dict[str, Any],
    status: int,
    action: str,
) -> None:
    """Issue 17: an unknown plan id during a backend hang answered 502 after 54 s, and with
    a 429 Retry-After: 30, 503 after 90 s: the request waited on the whole-list reload."""
    timeout = 1.0
    sim = start_simulator()
    gw = start_gateway(sim.url, NEGATIVE_CACHE_SECONDS=0, UPSTREAM_TIMEOUT_SECONDS=timeout)
    assert gw.get("/api/v1/internet-plans/").status_code == 200
    sim.state.faults.update({**faults, "path_prefix": "/api/plan-internet/"})
    for plan_id in (4242, 4243, 4242):  # a loop of the same call, then another id
        started = time.monotonic()
        response = gw.get(f"/api/v1/internet-plans/{plan_id}")
        took = time.monotonic() - started
        assert took < timeout + 2, took
        assert response.status_code == status, response.text
        body = response.json()
        assert (body["ok"], body["action"], body["data"]) == (False, action, None)
        if status == 503:
            assert 1 <= int(response.headers["Retry-After"]) <= 30
    # A known plan still answers from the cached list.
    sim.state.faults.update({"reset": True})
    assert gw.get("/api/v1/internet-plans/2").status_code == 200
