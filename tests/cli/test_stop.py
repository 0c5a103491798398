"""A stop that loses nothing (issue 21), on `isp-gateway serve --workers 2` against the
simulator: SIGTERM answers the long polls in flight at once (`ping_pending` and the task id,
for the bot to poll another replica), lets a ticket creation that has sent its POST finish
and refuses one that has not (503 and Retry-After, nothing upstream), leaves no lock in
Redis, and ends within seconds, not at a kill timeout."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from isp_gateway.auth.tokens import issue_token
from isp_gateway.serving import graceful_stop_seconds
from isp_gateway.web.params import MAX_WAIT_SECONDS
from tests.conftest import USERNAME, Simulator, StartSimulator, gateway_settings, serve_env
from tests.network.test_ping_api import PING_CREATES, TASK_READS
from tests.support import (
    data_file_of,
    free_port,
    serve_args,
    server_process,
    wait_ready,
    wait_until,
)
from tests.tickets.conftest import build_dataset, post_calls, ticket_body

REDIS_DB = 5
# A long poll in flight is answered this soon after SIGTERM; the whole stop ends this soon,
# where a long poll used to hold it until the kill timeout (20 s) and die unanswered.
ANSWERED_WITHIN = 5.0
STOPPED_WITHIN = 10.0


@dataclass
class Served:
    """`serve --workers 2` with a token; each request on a new connection (either worker)."""

    url: str
    token: str
    stop: Callable[[], float]  # SIGTERM; the seconds until the process ended
    log: Path

    def call(self, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.token}", "Connection": "close"}
        headers.update(kw.pop("headers", {}))
        return httpx.request(method, self.url + path, headers=headers, timeout=30, **kw)


@contextmanager
def served(upstream_url: str, password_hash: str, cwd: Path, **env: str) -> Iterator[Served]:
    """`serve --workers 2` with these settings, ready; its stderr in cwd / "serve.log"."""
    token = issue_token(gateway_settings(upstream_url, password_hash), USERNAME)
    port = free_port()
    url, log = f"http://127.0.0.1:{port}", cwd / "serve.log"
    args = serve_args(port, "--workers", "2")
    with (
        log.open("wb") as stderr,
        server_process(
            args, serve_env(upstream_url, password_hash, **env), cwd, None, stderr
        ) as proc,
    ):
        wait_ready(url, proc, "/ready")

        def stop() -> float:
            asked = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
            return time.monotonic() - asked

        yield Served(url, token, stop, log)


def answered(call: Callable[[], httpx.Response]) -> Callable[[], tuple[httpx.Response, float]]:
    """`call`, returning its answer and when it came."""
    return lambda: (call(), time.monotonic())


def active_services(sim: Simulator) -> list[int]:
    return [c["id_servicio"] for c in sim.state.dataset.clients if c["estado"] == "Activo"]


@pytest.mark.parametrize("server", ["granian", "uvicorn"])
def test_a_stop_answers_the_long_polls_at_once(
    simulator: Simulator, password_hash: str, tmp_path: Path, shared_redis: str, server: str
) -> None:
    simulator.state.ping_duration = 120  # no ping ends while the test runs
    first, second = active_services(simulator)[:2]
    settings = {"SERVER": server, "REDIS_URL": shared_redis, "PING_POLL_INTERVAL_SECONDS": "0.1"}
    with (
        served(simulator.url, password_hash, tmp_path, **settings) as gw,
        ThreadPoolExecutor(2) as pool,
    ):
        created = gw.call("POST", f"/api/v1/{first}/ping/", json={"pings": 4})
        task_id = created.json()["data"]["task_id"]
        poll = pool.submit(answered(lambda: gw.call("GET", f"/api/v1/ping/{task_id}/?wait=25")))
        # The long poll reads the task upstream every 0.1 s: it is in flight.
        wait_until(
            lambda: simulator.state.calls[TASK_READS] > 0,
            message="the long poll to read",
            timeout=30,
        )
        path = f"/api/v1/clients/{second}/diagnose?wait=25"
        diagnose = pool.submit(answered(lambda: gw.call("POST", path)))
        # Its ping created, the diagnose is in its long poll (or about to be).
        wait_until(
            lambda: simulator.state.calls[PING_CREATES] == 2,
            message="the diagnose to ping",
            timeout=30,
        )
        asked = time.monotonic()
        stopped_in = gw.stop()
        answers = [poll.result(timeout=30), diagnose.result(timeout=30)]
    for response, at in answers:
        assert response.status_code == 200, response.text
        body = response.json()
        assert (body["ok"], body["type"], body["action"]) == (True, "info", "ping_pending")
        assert at - asked < ANSWERED_WITHIN
    assert answers[0][0].json()["data"]["task_id"] == task_id
    diagnosed = answers[1][0].json()["data"]
    assert diagnosed["service_id"] == second and diagnosed["task_id"] not in (None, task_id)
    log = gw.log.read_text()
    assert stopped_in < STOPPED_WITHIN, log
    assert "Traceback" not in log


def test_a_stop_finishes_a_sent_creation_refuses_an_unsent_one_and_leaves_no_lock(
    start_simulator: StartSimulator,
    password_hash: str,
    tmp_path: Path,
    shared_redis: str,
) -> None:
    sim = start_simulator(data_file=data_file_of(tmp_path / "upstream.json", build_dataset()))
    # Every zone count reads the upstream's list afresh (ZONE_SWEEP_FRESH_SECONDS).
    settings = {"REDIS_URL": shared_redis, "ZONE_SWEEP_FRESH_SECONDS": "0.001"}
    with (
        redis.Redis.from_url(shared_redis) as store,
        served(sim.url, password_hash, tmp_path, **settings) as gw,
        ThreadPoolExecutor(2) as pool,
    ):
        # Every ticket call upstream now takes 1.5 s: one creation is held in its POST, the
        # other in its zone count, with nothing sent.
        sim.state.faults.update(
            {"latency": 1.5, "scopes": {"latency": {"path_prefix": "/api/tickets/"}}}
        )

        def creation(key: str, **body: Any) -> Future[httpx.Response]:
            request = {"json": ticket_body(**body), "headers": {"Idempotency-Key": key}}
            return pool.submit(lambda: gw.call("POST", "/api/v1/tickets", **request))

        sent = creation("stop-sent", service_id=101, zone_id=1)
        wait_until(lambda: post_calls(sim) == 1, message="the first creation to post", timeout=30)
        # From here ticket calls take 3 s (the POST in flight keeps its 1.5 s): the second
        # creation must still be in its count when SIGTERM lands, a margin a stalled test
        # process keeps, and only its count waits longer.
        sim.state.faults.update({"latency": 3.0})
        unsent = creation("stop-unsent", service_id=301, zone_id=3)
        wait_until(
            lambda: bool(store.exists("ispgw:lock:zone:3")), message="a count in zone 3", timeout=30
        )
        stopped_in = gw.stop()
        finished, refused = sent.result(timeout=30), unsent.result(timeout=30)
        # No zone, service or idempotency lock is left to expire.
        assert sorted(store.scan_iter("ispgw:lock:*")) == []
    assert finished.status_code == 201, finished.text
    assert refused.status_code == 503, refused.text
    body = refused.json()
    assert (body["action"], body["meta"]["reason"]) == ("ticket_creation_failed", "server_stopping")
    assert refused.headers["Retry-After"] == "1"
    # Nothing of the refused creation reached the upstream; the finished one is there.
    assert post_calls(sim) == 1
    assert [t["servicio"]["id_servicio"] for t in sim.state.created_tickets] == [101]
    assert stopped_in < STOPPED_WITHIN, gw.log.read_text()


@pytest.mark.parametrize("timeout", [1, 10, 60])
def test_the_graceful_window_outlasts_the_longest_request(timeout: int) -> None:
    # The longest request: a long poll's wait, then one upstream call.
    assert graceful_stop_seconds(timeout) > MAX_WAIT_SECONDS + timeout
