"""Issue 28, point 18: the first load of a large client list shows its progress, in the log
("clients: loading 1200/3000") and in /ready (`checks.clients = "loading 1200/3000"`), and a
request that needs the whole list while it loads is answered at once 503 `loading` with a
Retry-After estimated from the progress: never a 502 after waiting out its deadline (at
20,000 clients a search waited 10 s and answered 502 "The ISP backend is not available"
although the backend was up)."""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import httpx
import pytest

from tests.conftest import Gateway, Simulator, StartGateway, StartSimulator
from tests.support import RedisServer

CLIENTS = 3000
# 30 pages one after the other, 0.15 s each: a first load of about 5 s, longer than a
# request may wait (UPSTREAM_TIMEOUT_SECONDS + 2 s at most; the load itself is bounded by 3).
SLOW = {
    "UPSTREAM_PAGE_SIZE": 100,
    "UPSTREAM_PARALLEL_PAGES": 1,
    "UPSTREAM_TIMEOUT_SECONDS": 3.0,
}
PAGE_SECONDS = 0.15
# Answered at once: well before the deadline, whatever the machine's load.
AT_ONCE = 1.5


@pytest.fixture
def slow_upstream(start_simulator: StartSimulator) -> Simulator:
    sim = start_simulator(clients=CLIENTS)
    sim.state.faults.update(
        {"latency": PAGE_SECONDS, "scopes": {"latency": {"path_prefix": "/api/clientes/"}}}
    )
    return sim


def timed(gw: Gateway, path: str) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = gw.get(path)
    return response, time.monotonic() - started


def assert_loading(response: httpx.Response, seconds: float) -> dict[str, Any]:
    body: dict[str, Any] = response.json()
    assert response.status_code == 503, response.text
    assert (body["ok"], body["type"], body["action"]) == (False, "error", "loading")
    assert seconds < AT_ONCE
    read, total = body["meta"]["read"], body["meta"]["total"]
    assert 0 < read < total == CLIENTS
    retry = int(response.headers["Retry-After"])
    # From the pace so far: the rest of 30 pages of 0.15 s, at least 1 s, never a guess of
    # minutes.
    assert 1 <= retry <= 20
    # The catalogue's text, in the default language (Spanish; English with
    # MESSAGES_LANGUAGE=en: "The client list is still loading from the ISP backend ...").
    assert body["message"] == (
        f"La lista de clientes todavía se está cargando del sistema del proveedor ({read} de "
        f"{total}); intente de nuevo en {retry} s"
    )
    return body


def wait_loaded(gw: Gateway, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while gw.client.get("/ready").status_code != 200:
        assert time.monotonic() < deadline, "the client list never loaded"
        time.sleep(0.1)


def test_a_first_load_answers_loading_and_shows_its_progress(
    slow_upstream: Simulator,
    start_gateway: StartGateway,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="isp_gateway")
    gw = start_gateway(slow_upstream.url, **SLOW)
    for path in ("/api/v1/clients/search?q=maria", "/api/v1/clients/"):
        assert_loading(*timed(gw, path))
    ready = gw.client.get("/ready")
    assert ready.status_code == 503
    clients = ready.json()["checks"]["clients"]
    assert re.fullmatch(rf"loading \d+/{CLIENTS}", clients), clients
    assert ready.json()["failing"] == ["clients"]
    # Lookups do not need the whole list: asked of the upstream meanwhile, as ever.
    document = slow_upstream.state.dataset.clients[0]["cedula"]
    assert gw.get(f"/api/v1/clients/by-document/{document}").status_code == 200

    wait_loaded(gw)
    found = gw.get("/api/v1/clients/search?q=maria")
    assert found.status_code == 200, found.text
    assert gw.client.get("/ready").json()["checks"]["clients"] == "ok"

    lines = [r.getMessage() for r in caplog.records if r.name == "isp_gateway.cache"]
    progress = [line for line in lines if line.startswith("clients: loading ")]
    # One line a tenth of the list, the first page's included; then one line at the end.
    assert progress[0] == f"clients: loading 100/{CLIENTS}"
    assert 5 <= len(progress) <= 10, progress
    counts = [int(line.split()[2].split("/")[0]) for line in progress]
    assert counts == sorted(counts)
    (loaded,) = [line for line in lines if line.startswith("clients: loaded ")]
    assert re.fullmatch(rf"clients: loaded {CLIENTS} in \d+\.\d s", loaded), loaded


def test_a_worker_waiting_for_anothers_first_load_answers_loading(
    slow_upstream: Simulator, start_gateway: StartGateway, own_redis: RedisServer
) -> None:
    """Two workers sharing a Redis: one loads, the other waits for its lock; both tell the
    progress (the one that does not load reads it from the store)."""
    shared = {**SLOW, "REDIS_URL": own_redis.url + "/0"}
    workers = [start_gateway(slow_upstream.url, **shared) for _ in range(2)]
    time.sleep(4 * PAGE_SECONDS)  # a few pages in
    for gw in workers:
        assert_loading(*timed(gw, "/api/v1/clients/search?q=maria"))
        clients = gw.client.get("/ready").json()["checks"]["clients"]
        assert re.fullmatch(rf"loading \d+/{CLIENTS}", clients), clients
    for gw in workers:
        wait_loaded(gw)
        assert gw.get("/api/v1/clients/search?q=maria").status_code == 200
    # One of them loaded the list; the other adopted it.
    loads = [gw.runtime.services.clients.cache.loads for gw in workers]
    assert sorted(loads) == [0, 1]


def test_a_list_of_one_page_is_waited_for_as_before(
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A first load that ends in time answers the request that waited for it, and a list of
    one page writes no progress line."""
    caplog.set_level(logging.INFO, logger="isp_gateway")
    sim = start_simulator(clients=300)
    sim.state.faults.update(
        {"latency": 0.5, "scopes": {"latency": {"path_prefix": "/api/clientes/"}}}
    )
    gw = start_gateway(sim.url)
    response, _ = timed(gw, "/api/v1/clients/search?q=maria")
    assert response.status_code == 200, response.text
    assert not [r for r in caplog.records if "clients: load" in r.getMessage()]
