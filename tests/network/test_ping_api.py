"""Ping endpoints over loopback: the real app against the simulator (spec 4.12-4.13)."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from isp_gateway.simulator import SimulatorConfig, create_simulator_app
from tests.conftest import (
    API_KEY,
    Gateway,
    Simulator,
    StartGateway,
    StartSimulator,
    module_pair_fixtures,
)
from tests.support import run_server, wait_until

TASK_READS = "GET /api/tasks/{id}/"
PING_CREATES = "POST /api/clientes/{id}/ping/"


def service_ids(sim: Simulator, count: int) -> list[int]:
    return [row["id_servicio"] for row in sim.state.dataset.clients[:count]]


def create(gw: Gateway, service_id: int, pings: int = 4) -> str:
    response = gw.post(f"/api/v1/{service_id}/ping/", json={"pings": pings})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["ok"] is True and body["type"] == "success"
    assert body["action"] == "ping_created"
    assert body["message"] is None and body["meta"] is None
    assert set(body["data"]) == {"task_id"} and isinstance(body["data"]["task_id"], str)
    task_id: str = body["data"]["task_id"]
    return task_id


def poll(gw: Gateway, task_id: str, wait: float = 0) -> dict[str, Any]:
    response = gw.get(f"/api/v1/ping/{task_id}/", params={"wait": wait} if wait else None)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def decided(body: dict[str, Any]) -> dict[str, Any] | None:
    """A poll's answer once it is no longer pending."""
    return body if body["action"] != "ping_pending" else None


def not_200(response: httpx.Response) -> httpx.Response | None:
    return response if response.status_code != 200 else None


def new_task(task_id: str, old: str) -> str | None:
    return task_id if task_id != old else None


def timed_poll(gw: Gateway, task_id: str, wait: float) -> tuple[dict[str, Any], float]:
    """A long poll's answer and the seconds it took."""
    started = time.monotonic()
    body = poll(gw, task_id, wait=wait)
    return body, time.monotonic() - started


# The tests that take `gateway` and `simulator` are all refused before any ping is created:
# one pair serves them all (the others start their own).
simulator, gateway = module_pair_fixtures()


StartPing = Callable[..., tuple[Simulator, Gateway, str]]


@pytest.fixture
def ping_task(start_simulator: StartSimulator, start_gateway: StartGateway) -> StartPing:
    """`ping_task(duration, **settings)`: a simulator whose pings take `duration` seconds, a
    gateway with `settings`, and the task id of a ping it created."""

    def start(duration: float, **settings: Any) -> tuple[Simulator, Gateway, str]:
        sim = start_simulator(ping_duration=duration)
        gw = start_gateway(sim.url, **settings)
        return sim, gw, create(gw, service_ids(sim, 1)[0])

    return start


@pytest.fixture
def fast(start_simulator: StartSimulator, start_gateway: StartGateway) -> Any:
    """A simulator whose pings take 0.3 s and a gateway that may poll every 0.1 s."""
    sim = start_simulator(ping_duration=0.3)
    gw = start_gateway(sim.url, PING_POLL_INTERVAL_SECONDS=0.1, PING_COALESCE_SECONDS=10)
    return sim, gw


EXPECTED = [
    # kind, pings, action, sent, received, loss
    ("all_replies", 4, "stable_connection", 4, 4, 0.0),
    ("loss_10", 10, "stable_connection", 10, 9, 10.0),
    ("half_lost", 4, "intermittent_connection", 4, 2, 50.0),
    ("none", 4, "no_internet", 4, 0, 100.0),
    ("unreachable", 4, "no_internet", 4, 0, 100.0),
    ("mixed_hosts", 6, "stable_connection", 6, 6, 0.0),
    ("router_error", 4, "ping_failed", None, None, None),
    ("failure", 4, "ping_failed", None, None, None),
    ("malformed", 4, "ping_failed", None, None, None),
    ("malformed_text", 4, "ping_failed", None, None, None),
]


def test_full_flow_for_every_classification(fast: Any) -> None:
    sim, gw = fast
    ids = service_ids(sim, len(EXPECTED))
    tasks = {}
    for service_id, (kind, pings, *_rest) in zip(ids, EXPECTED, strict=True):
        sim.state.set_ping_outcome(service_id, kind)
        tasks[kind] = create(gw, service_id, pings)
    for kind, _pings, action, sent, received, loss in EXPECTED:
        body = poll(gw, tasks[kind], wait=10)
        assert body["action"] == action, kind
        assert body["data"] == {
            "task_id": tasks[kind],
            "sent": sent,
            "received": received,
            "loss_percent": loss,
        }, kind
        failed = action == "ping_failed"
        assert body["ok"] is (not failed)
        assert body["type"] == ("error" if failed else "success")
        assert isinstance(body["message"], str) and body["message"]


def test_pending_while_the_task_runs(ping_task: StartPing) -> None:
    sim, gw, task_id = ping_task(30, PING_POLL_INTERVAL_SECONDS=0.1)
    # Real time: the poll interval since the create (its latest contact) passes, so that
    # this poll reads the task upstream.
    time.sleep(0.15)
    body = poll(gw, task_id)
    assert body["ok"] is True and body["type"] == "info"
    assert body["action"] == "ping_pending"
    assert body["data"] == {"task_id": task_id, "status": "pending"}
    assert sim.state.calls[TASK_READS] == 1


def test_unknown_task_is_404(gateway: Gateway) -> None:
    for task_id in ("0" * 32, "not-a-task", "a" * 300):
        response = gateway.get(f"/api/v1/ping/{task_id}/")
        assert response.status_code == 404
        body = response.json()
        assert body["ok"] is False and body["action"] == "ping_failed"
        # Spanish by default (MESSAGES_LANGUAGE): 'Task not found' in English.
        assert body["message"] == "La prueba no existe" and body["data"] is None


def test_unknown_service_is_404_client_not_found(gateway: Gateway, simulator: Simulator) -> None:
    for service_id in (999_999,):
        response = gateway.post(f"/api/v1/{service_id}/ping/", json={"pings": 4})
        assert response.status_code == 404
        body = response.json()
        assert body["action"] == "client_not_found" and body["ok"] is False
    # 0 is no service id at all (CALLERS.md 2): 400 before any lookup.
    response = gateway.post("/api/v1/0/ping/", json={"pings": 4})
    assert response.status_code == 400
    assert response.json()["action"] == "invalid_service_id"
    # A confirmed miss of the clients source spends no upstream ping.
    assert simulator.state.calls[PING_CREATES] == 0


def test_upstream_404_alone_means_unknown_service(
    start_simulator: StartSimulator, start_gateway: StartGateway
) -> None:
    sim = start_simulator()
    # The clients source cannot answer: the ping request goes ahead and the upstream decides.
    sim.state.faults.update({"error_rate": 1.0, "method": "GET", "path_prefix": "/api/clientes/"})
    gw = start_gateway(sim.url)
    response = gw.post("/api/v1/999999/ping/", json={"pings": 4})
    assert response.status_code == 404
    assert response.json()["action"] == "client_not_found"
    assert sim.state.calls[PING_CREATES] == 1
    known = service_ids(sim, 1)[0]
    assert gw.post(f"/api/v1/{known}/ping/", json={"pings": 4}).status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        {"pings": 0},
        {"pings": 21},
        {"pings": "many"},
        # Wrong JSON types, not guesses: a digit string, a boolean, a fraction.
        {"pings": "4"},
        {"pings": True},
        {"pings": 4.5},
        {},
        None,
    ],
)
def test_pings_must_be_1_to_20(gateway: Gateway, simulator: Simulator, body: Any) -> None:
    sid = service_ids(simulator, 1)[0]
    response = gateway.post(f"/api/v1/{sid}/ping/", json=body)
    assert response.status_code == 422
    assert response.json()["action"] == "validation_error"
    assert simulator.state.calls[PING_CREATES] == 0


def test_wait_is_bounded(gateway: Gateway) -> None:
    for wait in ("-1", "26", "soon"):
        response = gateway.get(f"/api/v1/ping/{'0' * 32}/", params={"wait": wait})
        assert response.status_code == 422
        assert response.json()["action"] == "validation_error"


def test_needs_a_token(gateway: Gateway) -> None:
    assert gateway.client.post("/api/v1/101/ping/", json={"pings": 4}).status_code == 401
    assert gateway.client.get(f"/api/v1/ping/{'0' * 32}/").status_code == 401


def test_paths_without_trailing_slash_answer_directly(fast: Any) -> None:
    sim, gw = fast
    sid = service_ids(sim, 1)[0]
    response = gw.post(f"/api/v1/{sid}/ping", json={"pings": 2})
    assert response.status_code == 200 and response.json()["action"] == "ping_created"
    task_id = response.json()["data"]["task_id"]
    response = gw.get(f"/api/v1/ping/{task_id}", params={"wait": 5})
    assert response.status_code == 200 and response.json()["action"] == "stable_connection"


def test_polls_fan_in_to_one_upstream_read_per_interval(ping_task: StartPing) -> None:
    interval = 0.5
    sim, gw, task_id = ping_task(1.6, PING_POLL_INTERVAL_SECONDS=interval)
    started = time.monotonic()
    actions: list[str] = []

    def poller() -> None:
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            actions.append(poll(gw, task_id)["action"])
            time.sleep(0.02)  # the pace of a client's polls, not a wait

    with ThreadPoolExecutor(8) as pool:
        for future in [pool.submit(poller) for _ in range(8)]:
            future.result()
    # The ping ends about 2 s in, a little before the pollers stop (2.5 s): a stalled
    # process may stop them first, so the final answer is waited for, not taken from them.
    final = wait_until(lambda: decided(poll(gw, task_id)), message="a final answer")
    elapsed = time.monotonic() - started
    reads = sim.state.calls[TASK_READS]
    assert len(actions) > 100  # clients polled far more often than the upstream was asked
    assert "ping_pending" in actions and final["action"] == "stable_connection"
    # The first read comes an interval after creation, then at most one per interval.
    assert 1 <= reads <= int(elapsed / interval) + 1
    # Once final, polls are answered from the record.
    for _ in range(20):
        assert poll(gw, task_id)["action"] == "stable_connection"
    assert sim.state.calls[TASK_READS] == reads


def test_creates_for_one_service_within_the_window_share_one_task(
    start_simulator: StartSimulator, start_gateway: StartGateway
) -> None:
    sim = start_simulator(ping_duration=0.3)
    # 3 s: the six creates must all come within the window, a margin a stalled test process
    # keeps.
    gw = start_gateway(sim.url, PING_POLL_INTERVAL_SECONDS=0.1, PING_COALESCE_SECONDS=3.0)
    first, second = service_ids(sim, 2)
    with ThreadPoolExecutor(6) as pool:
        ids = list(pool.map(lambda _: create(gw, first), range(6)))
    assert len(set(ids)) == 1
    assert sim.state.calls[PING_CREATES] == 1
    # Another service gets its own task.
    other = create(gw, second)
    assert other != ids[0] and sim.state.calls[PING_CREATES] == 2
    # After the window (3 s from the first create; creates meanwhile share its task) a new
    # request starts a new task.
    again = wait_until(lambda: new_task(create(gw, first), ids[0]), interval=0.05)
    assert again != ids[0] and sim.state.calls[PING_CREATES] == 3
    assert poll(gw, ids[0], wait=5)["action"] == "stable_connection"


def test_long_poll_returns_as_soon_as_the_result_is_final(ping_task: StartPing) -> None:
    sim, gw, task_id = ping_task(0.8, PING_POLL_INTERVAL_SECONDS=0.2)
    body, elapsed = timed_poll(gw, task_id, wait=20)
    assert body["action"] == "stable_connection"
    assert elapsed < 3.0
    assert sim.state.calls[TASK_READS] <= int(elapsed / 0.2) + 1


def test_long_poll_answers_pending_when_the_wait_passes(ping_task: StartPing) -> None:
    sim, gw, task_id = ping_task(30, PING_POLL_INTERVAL_SECONDS=0.25)
    body, elapsed = timed_poll(gw, task_id, wait=1.2)
    assert body["action"] == "ping_pending"
    assert 1.1 <= elapsed < 2.5
    assert 1 <= sim.state.calls[TASK_READS] <= 5


def test_long_poll_keeps_its_deadline_when_the_upstream_read_hangs(ping_task: StartPing) -> None:
    sim, gw, task_id = ping_task(0.5, PING_POLL_INTERVAL_SECONDS=0.2, UPSTREAM_TIMEOUT_SECONDS=3)
    sim.state.faults.update({"hang_rate": 1.0, "hang_seconds": 10, "path_prefix": "/api/tasks/"})
    body, elapsed = timed_poll(gw, task_id, wait=1)
    # Answered when the wait passed, not when the hung read timed out (3 s).
    assert body["action"] == "ping_pending"
    assert 0.9 <= elapsed < 2.0
    assert sim.state.calls[TASK_READS] == 1
    # The read goes on in the background; once the upstream answers again a poll gets the result.
    sim.state.faults.update({"reset": True})
    assert poll(gw, task_id, wait=10)["action"] == "stable_connection"


def test_task_gone_upstream_is_ping_failed(fast: Any) -> None:
    sim, gw = fast
    task_id = create(gw, service_ids(sim, 1)[0])
    sim.state.tasks.clear()  # the upstream forgot the task: its reads answer 404
    # Pending until the poll interval has passed and a poll reads the task again.
    body = wait_until(lambda: decided(poll(gw, task_id)))
    assert body["action"] == "ping_failed" and body["ok"] is False
    assert body["data"] == {
        "task_id": task_id,
        "sent": None,
        "received": None,
        "loss_percent": None,
    }


def test_upstream_down_while_polling_is_502_then_recovers(fast: Any) -> None:
    sim, gw = fast
    task_id = create(gw, service_ids(sim, 1)[0])
    sim.state.faults.update({"error_rate": 1.0, "path_prefix": "/api/tasks/"})
    # Pending (200) until the poll interval has passed and a poll reads the task again.
    response = wait_until(lambda: not_200(gw.get(f"/api/v1/ping/{task_id}/")))
    assert response.status_code == 502
    assert response.json()["action"] == "upstream_unavailable"
    sim.state.faults.update({"reset": True})
    assert poll(gw, task_id, wait=5)["action"] == "stable_connection"


def test_create_upstream_failures(fast: Any) -> None:
    sim, gw = fast
    sid = service_ids(sim, 1)[0]
    # Down: 502 upstream_unavailable.
    sim.state.faults.update({"error_rate": 1.0, "method": "POST"})
    response = gw.post(f"/api/v1/{sid}/ping/", json={"pings": 4})
    assert response.status_code == 502
    assert response.json()["action"] == "upstream_unavailable"
    # Answered, but without queuing a task (not a 202): ping_failed.
    sim.state.faults.update({"reset": True, "garbage": 1.0, "method": "POST"})
    response = gw.post(f"/api/v1/{sid}/ping/", json={"pings": 4})
    assert response.status_code == 502
    body = response.json()
    assert body["action"] == "ping_failed" and body["ok"] is False and body["data"] is None
    # A failed create is not shared with the next request.
    sim.state.faults.update({"reset": True})
    task_id = create(gw, sid)
    assert poll(gw, task_id, wait=5)["action"] == "stable_connection"


class RefusePings:
    """In front of the simulator: ping requests answer 400 with DRF field errors."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/ping/"):
            await self.app(scope, receive, send)
            return
        body = b'{"interfaz": ["Interfaz secreta ether9 no existe en router 10.0.0.1"]}'
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 400, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def test_create_refused_with_field_errors_or_403(start_gateway: StartGateway) -> None:
    app = create_simulator_app(SimulatorConfig(api_key=API_KEY, clients=20))
    with run_server(RefusePings(app)) as url:
        gw = start_gateway(url)
        sid = app.state.sim.dataset.clients[0]["id_servicio"]
        response = gw.post(f"/api/v1/{sid}/ping/", json={"pings": 4})
        assert response.status_code == 502
        body = response.json()
        assert (body["ok"], body["action"], body["data"]) == (False, "ping_failed", None)
        assert "10.0.0.1" not in response.text and "ether9" not in response.text
    sim_state = app.state.sim
    sim_state.faults.update({"force_403": True, "method": "POST"})
    with run_server(app) as url:
        gw = start_gateway(url)
        response = gw.post(f"/api/v1/{sid}/ping/", json={"pings": 4})
        assert response.status_code == 502
        assert response.json()["action"] == "upstream_unauthorized"
        assert API_KEY not in response.text


def test_long_poll_answers_a_rate_limit_it_cannot_outwait_at_once(fast: Any) -> None:
    """The fuzzer's find (issue 17): a diagnose's default 20 s long poll, its task reads
    refused by the rate limit, kept retrying and answered the 503 only when the 20 s were
    over. A Retry-After longer than the time left is answered at once (CALLERS.md 2)."""
    sim, gw = fast
    task_id = create(gw, service_ids(sim, 1)[0])
    sim.state.faults.update({"force_429": True, "retry_after": 30})
    time.sleep(0.15)  # real time: the poll interval passes, so the long poll reads at once
    started = time.monotonic()
    response = gw.get(f"/api/v1/ping/{task_id}/", params={"wait": 10})
    elapsed = time.monotonic() - started
    assert response.status_code == 503, response.text
    assert response.json()["action"] == "upstream_rate_limited"
    assert int(response.headers["Retry-After"]) > 0
    assert elapsed < 3


def test_pings_waiting_on_a_hung_create_answer_within_the_deadline(
    start_simulator: StartSimulator, start_gateway: StartGateway
) -> None:
    # CALLERS.md 2: every answer within UPSTREAM_TIMEOUT_SECONDS + 2 s. Four pings for one
    # service while the backend hangs on the first: the others waited for its lock, then
    # sent their own (1.5 s + 1.5 s and more), or waited the lock's 6.5 s.
    simulator = start_simulator()
    gw = start_gateway(simulator.url, UPSTREAM_TIMEOUT_SECONDS=1.5)
    service_id = service_ids(simulator, 1)[0]
    simulator.state.faults.update(
        {"hang_rate": 1.0, "hang_seconds": 30, "method": "POST", "path_prefix": "/api/clientes/"}
    )

    def timed(_: int) -> tuple[int, float]:
        started = time.monotonic()
        response = gw.post(f"/api/v1/{service_id}/ping/", json={"pings": 4})
        return response.status_code, time.monotonic() - started

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(timed, range(4)))
    assert {status for status, _ in answers} == {502}, answers
    assert max(elapsed for _, elapsed in answers) < 1.5 + 2.0, answers
