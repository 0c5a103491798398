"""GET /ready, and what the service answers while its Redis is away: a redis-server of this
test's own, killed mid-run and started again on the same port."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import PASSWORD, USERNAME, Gateway, Simulator, start_redis_server
from tests.support import RedisServer, free_port
from tests.tickets.conftest import build_dataset, post_calls, ticket_body


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    server = start_redis_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def ticket_sim(tmp_path: Path, start_simulator: Callable[..., Simulator]) -> Simulator:
    path = tmp_path / "upstream.json"
    path.write_text(json.dumps(build_dataset(), ensure_ascii=False), "utf-8")
    return start_simulator(data_file=path)


def wait_ready(gw: Gateway, status: int, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        response = gw.client.get("/ready")
        if response.status_code == status:
            body: dict[str, Any] = response.json()
            return body
        assert time.monotonic() < deadline, f"/ready stayed {response.status_code}"
        time.sleep(0.1)


def assert_store_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert (body["ok"], body["type"], body["action"]) == (False, "error", "store_unavailable")
    assert "Traceback" not in response.text and "redis" not in response.text.lower()
    assert response.headers["retry-after"]


def login(gw: Gateway) -> httpx.Response:
    return gw.client.post("/api/v1/auth/token", data={"username": USERNAME, "password": PASSWORD})


def test_ready_follows_the_store_through_an_outage(
    own_redis: RedisServer, ticket_sim: Simulator, start_gateway: Callable[..., Gateway]
) -> None:
    gw = start_gateway(ticket_sim.url, REDIS_URL=own_redis.url + "/0")
    body = wait_ready(gw, 200)
    assert body == {"status": "ready", "checks": {"store": "ok", "clients": "ok"}}
    service = gw.get("/api/v1/clients/").json()["data"][0]
    lookup = f"/api/v1/clients/by-document/{service['document']}"
    for _ in range(3):  # warm: the last ones take the fast path
        assert gw.get(lookup).status_code == 200

    own_redis.stop()
    body = wait_ready(gw, 503)
    assert body["status"] == "not_ready" and body["failing"] == ["store"]
    assert body["checks"] == {"store": "unavailable", "clients": "ok"}
    # Liveness touches nothing; metrics still answer.
    assert gw.client.get("/health").status_code == 200
    assert gw.client.get("/metrics").status_code == 200
    # Lookups (fast path and routed), the list, a zone status: a clear 503 envelope.
    assert_store_unavailable(gw.get(lookup))
    assert_store_unavailable(gw.get("/api/v1/clients/by-service-id/999999"))
    assert_store_unavailable(gw.get("/api/v1/clients/"))
    # No ticket without its zone lock: refused before any upstream call.
    created = gw.post("/api/v1/tickets", json=ticket_body(zone_id=3))
    assert_store_unavailable(created)
    assert post_calls(ticket_sim) == 0 and not ticket_sim.state.created_tickets
    # The login throttle never turns off silently: the token endpoint refuses, in its shape.
    refused = login(gw)
    assert refused.status_code == 503 and set(refused.json()) == {"detail"}

    own_redis.start()  # the same port, empty (no persistence)
    body = wait_ready(gw, 200)
    assert body["checks"] == {"store": "ok", "clients": "ok"}
    assert gw.get(lookup).status_code == 200
    assert login(gw).status_code == 200
    assert gw.post("/api/v1/tickets", json=ticket_body(zone_id=3)).status_code == 201


def test_not_ready_until_the_client_list_has_loaded(start_gateway: Callable[..., Gateway]) -> None:
    # An upstream nobody listens on: the list cannot load.
    gw = start_gateway(f"http://127.0.0.1:{free_port()}")
    response = gw.client.get("/ready")
    assert response.status_code == 503
    assert response.json() == {
        "status": "not_ready",
        "checks": {"store": "ok", "clients": "not_loaded"},
        "failing": ["clients"],
    }
    assert gw.client.get("/health").status_code == 200
