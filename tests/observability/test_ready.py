"""GET /ready, and what the service answers while its Redis is away: a redis-server of this
test's own, killed mid-run and started again on the same port."""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from isp_gateway.auth.keys import generate_key, new_entry, write_key_entries
from tests.conftest import PASSWORD, USERNAME, Gateway, Simulator, StartGateway, StartSimulator
from tests.support import RedisServer, free_port, wait_until
from tests.tickets.conftest import build_dataset, post_calls, ticket_body


@pytest.fixture
def ticket_sim(tmp_path: Path, start_simulator: StartSimulator) -> Simulator:
    path = tmp_path / "upstream.json"
    path.write_text(json.dumps(build_dataset(), ensure_ascii=False), "utf-8")
    return start_simulator(data_file=path)


def wait_ready(gw: Gateway, status: int, timeout: float = 30) -> dict[str, Any]:
    def answered() -> dict[str, Any] | None:
        response = gw.client.get("/ready")
        body: dict[str, Any] = response.json()
        return body if response.status_code == status else None

    return wait_until(
        answered, timeout=timeout, interval=0.05, message=f"/ready to answer {status}"
    )


def unauthorized(body: dict[str, Any]) -> dict[str, Any] | None:
    return body if body["checks"]["upstream"] == "unauthorized" else None


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
    own_redis: RedisServer, ticket_sim: Simulator, start_gateway: StartGateway
) -> None:
    gw = start_gateway(ticket_sim.url, REDIS_URL=own_redis.url + "/0")
    body = wait_ready(gw, 200)
    assert body == {
        "status": "ready",
        "checks": {"store": "ok", "clients": "ok", "upstream": "ok"},
    }
    service = gw.get("/api/v1/clients/").json()["data"][0]
    lookup = f"/api/v1/clients/by-document/{service['document']}"
    for _ in range(3):  # warm: the last ones take the fast path
        assert gw.get(lookup).status_code == 200

    own_redis.stop()
    body = wait_ready(gw, 503)
    assert body["status"] == "not_ready" and body["failing"] == ["store"]
    assert body["checks"] == {"store": "unavailable", "clients": "ok", "upstream": "ok"}
    # Liveness touches nothing; metrics still answer.
    assert gw.client.get("/health").status_code == 200
    assert gw.client.get("/metrics").status_code == 200
    # A lookup that hits the warm index answers from this process's copy (issue 21: lookups
    # ride out a failover); a miss (routed), the list, a zone status: a clear 503 envelope.
    for _ in range(3):
        assert gw.get(lookup).status_code == 200
    assert_store_unavailable(gw.get("/api/v1/clients/by-service-id/999999"))
    assert_store_unavailable(gw.get("/api/v1/clients/"))
    # No ticket without its zone lock: refused before any upstream call.
    created = gw.post("/api/v1/tickets", json=ticket_body(zone_id=3, service_id=301))
    assert_store_unavailable(created)
    assert post_calls(ticket_sim) == 0 and not ticket_sim.state.created_tickets
    # The login throttle never turns off silently: the token endpoint refuses, in its shape.
    refused = login(gw)
    assert refused.status_code == 503 and set(refused.json()) == {"detail"}

    own_redis.start()  # the same port, empty (no persistence)
    body = wait_ready(gw, 200)
    assert body["checks"] == {"store": "ok", "clients": "ok", "upstream": "ok"}
    assert gw.get(lookup).status_code == 200
    assert login(gw).status_code == 200
    created = gw.post("/api/v1/tickets", json=ticket_body(zone_id=3, service_id=301))
    assert created.status_code == 201


def test_not_ready_until_the_client_list_has_loaded(start_gateway: StartGateway) -> None:
    # An upstream nobody listens on: the list cannot load.
    gw = start_gateway(f"http://127.0.0.1:{free_port()}")
    response = gw.client.get("/ready")
    assert response.status_code == 503
    assert response.json() == {
        "status": "not_ready",
        "checks": {"store": "ok", "clients": "not_loaded", "upstream": "ok"},
        "failing": ["clients"],
    }
    assert gw.client.get("/health").status_code == 200


def test_not_ready_while_the_upstream_refuses_our_key(
    start_simulator: StartSimulator, start_gateway: StartGateway
) -> None:
    """Issue 17: with the backend refusing our key, /ready named only `clients: not_loaded`."""
    sim = start_simulator()
    # The simulator answers 403 to any key but its own.
    gw = start_gateway(sim.url, UPSTREAM_NET_KEY="not-the-backend-key")
    body = wait_ready(gw, 503)
    if body["checks"]["upstream"] != "unauthorized":
        body = wait_until(lambda: unauthorized(gw.client.get("/ready").json()), interval=0.05)
    assert body["status"] == "not_ready"
    assert body["checks"] == {"store": "ok", "clients": "not_loaded", "upstream": "unauthorized"}
    assert body["failing"] == ["clients", "upstream"]
    assert "not-the-backend-key" not in json.dumps(body)


def test_a_key_refused_after_start_fails_ready_until_accepted_again(
    start_simulator: StartSimulator, start_gateway: StartGateway
) -> None:
    sim = start_simulator()
    gw = start_gateway(sim.url)
    assert wait_ready(gw, 200)["checks"]["upstream"] == "ok"
    sim.state.faults.update({"force_403": True})
    assert gw.get("/api/v1/clients/by-service-id/999999").status_code == 502
    body = wait_ready(gw, 503)
    assert body["checks"]["upstream"] == "unauthorized" and body["failing"] == ["upstream"]
    sim.state.faults.reset()
    assert gw.get("/api/v1/clients/by-service-id/999999").status_code == 404
    assert wait_ready(gw, 200)["checks"]["upstream"] == "ok"


def test_a_frozen_redis_answers_503_on_time(
    own_redis: RedisServer, ticket_sim: Simulator, start_gateway: StartGateway
) -> None:
    """Issue 17: a frozen (not dead) Redis held requests for 40 s and more: the client had no
    timeout. Now each store command waits REDIS_TIMEOUT_SECONDS and the request answers 503
    `store_unavailable` like with a dead Redis, within UPSTREAM_TIMEOUT_SECONDS + 2 s."""
    upstream_timeout = 2.0
    gw = start_gateway(
        ticket_sim.url,
        REDIS_URL=own_redis.url + "/0",
        REDIS_TIMEOUT_SECONDS=0.5,
        UPSTREAM_TIMEOUT_SECONDS=upstream_timeout,
    )
    wait_ready(gw, 200)
    service = gw.get("/api/v1/clients/").json()["data"][0]
    lookup = f"/api/v1/clients/by-document/{service['document']}"
    assert gw.get(lookup).status_code == 200
    assert own_redis.process is not None
    pid = own_redis.process.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        for _ in range(2):  # the second time on connections the first one left behind
            started = time.monotonic()
            assert gw.get(lookup).status_code == 200  # the warm index answers
            assert time.monotonic() - started < upstream_timeout + 2
            for call in (
                lambda: gw.get("/api/v1/clients/by-service-id/999999"),
                lambda: gw.get("/api/v1/clients/"),
                lambda: gw.post("/api/v1/tickets", json=ticket_body(zone_id=3)),
            ):
                started = time.monotonic()
                response = call()
                took = time.monotonic() - started
                assert_store_unavailable(response)
                assert took < upstream_timeout + 2, took
        started = time.monotonic()
        refused = login(gw)
        assert refused.status_code == 503 and set(refused.json()) == {"detail"}
        assert time.monotonic() - started < upstream_timeout + 2
        started = time.monotonic()
        response = gw.client.get("/ready")
        assert response.status_code == 503
        assert response.json()["checks"]["store"] == "unavailable"
        assert time.monotonic() - started < upstream_timeout + 2
        assert post_calls(ticket_sim) == 0 and not ticket_sim.state.created_tickets
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_ready(gw, 200)
    assert gw.get(lookup).status_code == 200


# -- the API key file (CALLERS.md 6) ------------------------------------------------------------


def test_ready_says_when_the_key_file_cannot_be_read(
    simulator: Simulator,
    start_gateway: StartGateway,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    path = tmp_path / "keys.json"
    key = generate_key()
    write_key_entries(path, [new_entry(key, "portal", ["plans:read"], None)])
    gw = start_gateway(simulator.url, API_KEYS_FILE=str(path))
    assert wait_ready(gw, 200) == {
        "status": "ready",
        "checks": {"store": "ok", "clients": "ok", "upstream": "ok", "keys": "ok"},
    }
    plans = "/api/v1/internet-plans/"
    assert gw.client.get(plans, headers={"X-API-Key": key}).status_code == 200
    caplog.set_level(logging.INFO, logger="isp_gateway")

    def errors() -> int:
        return len([r for r in caplog.records if r.levelno >= logging.ERROR])

    path.write_text('{"keys": [')  # broken JSON: an error, never "no keys"
    body = wait_ready(gw, 503)
    assert body["checks"] == {
        "store": "ok",
        "clients": "ok",
        "upstream": "ok",
        "keys": "unreadable",
    }
    assert body["failing"] == ["keys"]
    assert gw.client.get(plans, headers={"X-API-Key": key}).status_code == 200  # last good keys
    time.sleep(2.5)  # the file looked at twice more, unchanged: no second line
    assert gw.client.get("/ready").status_code == 503
    assert errors() == 1
    path.unlink()
    path.mkdir()  # a directory in its place: another change, one more line
    deadline = time.monotonic() + 10
    while errors() < 2:
        assert time.monotonic() < deadline, "the change was not seen"
        gw.client.get("/ready")
        time.sleep(0.1)
    assert gw.client.get("/ready").json()["checks"]["keys"] == "unreadable"
    assert gw.client.get(plans, headers={"X-API-Key": key}).status_code == 200
    assert errors() == 2
    message = caplog.records[-1].getMessage()
    assert "API_KEYS_FILE" in message and str(path) in message and key not in message
    path.rmdir()  # no file: no keys, and nothing wrong (a file not made yet, CALLERS.md 3)
    assert wait_ready(gw, 200)["checks"]["keys"] == "ok"
    assert gw.client.get(plans, headers={"X-API-Key": key}).status_code == 401


def test_ready_fails_while_the_store_answers_read_only(
    ticket_sim: Simulator, start_gateway: StartGateway, tmp_path: Path
) -> None:
    """REDIS_URL's Redis demoted to a replica (a failover done by hand, or by Sentinel for a
    service that names one server): it answers reads and refuses every write. /ready read a
    key and said `store: ok` while logins and nearly every request answered 503
    store_unavailable, so a load balancer kept the replica in its pool."""
    import redis

    # Both with their files in tmp_path: a replica writes the copy it receives.
    store, other = RedisServer(directory=tmp_path), RedisServer(directory=tmp_path / "other")
    (tmp_path / "other").mkdir()
    store.start()
    other.start()
    try:
        gw = start_gateway(ticket_sim.url, REDIS_URL=store.url + "/0")
        wait_ready(gw, 200)
        with redis.Redis(port=store.port) as admin:
            admin.replicaof("127.0.0.1", str(other.port))
            assert login(gw).status_code == 503  # the login throttle cannot be written
            body = wait_ready(gw, 503, timeout=5)
            assert body["checks"]["store"] == "unavailable" and body["failing"] == ["store"]
            admin.replicaof("NO", "ONE")
        wait_ready(gw, 200)
        assert login(gw).status_code == 200
    finally:
        store.stop()
        other.stop()
