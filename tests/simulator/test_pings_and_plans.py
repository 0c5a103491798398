"""Ping tasks (every outcome kind) and internet plans over HTTP."""

from __future__ import annotations

import time
from typing import Any

import pytest

from isp_gateway.simulator import PING_KINDS
from isp_gateway.simulator.pings import default_kind
from tests.simulator.conftest import SimServer
from tests.support import wait_until


def _start_ping(server: SimServer, service_id: int, pings: Any = 4) -> str:
    response = server.client.post(f"/api/clientes/{service_id}/ping/", json={"pings": pings})
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["status"] == "PROCESS" and len(body["task_id"]) == 36
    task_id: str = body["task_id"]
    return task_id


def _final(server: SimServer, task_id: str, timeout: float = 5) -> dict[str, Any]:
    def finished() -> dict[str, Any] | None:
        response = server.client.get(f"/api/tasks/{task_id}/")
        assert response.status_code == 200
        task: dict[str, Any] = response.json()["task"]
        if task["status"] not in ("PROCESS", "PENDING"):
            return task
        assert task["result"] is None
        return None

    return wait_until(finished, timeout=timeout, message="the task to finish")


def _ping_run(server: SimServer, kind: str, pings: int = 4) -> dict[str, Any]:
    service_id = server.sim.dataset.clients[0]["id_servicio"]
    server.sim.set_ping_outcome(service_id, kind)
    return _final(server, _start_ping(server, service_id, pings))


def _entries(result: list[dict[str, Any]]) -> list[Any]:
    return [next(iter(item.values())) for item in result[:-1]]


def test_task_is_process_then_success(server: SimServer) -> None:
    # 2 s: the first read, right after the create, still comes within it when the test
    # process stalls (up to a second on a loaded CI machine).
    server.sim.ping_duration = 2
    service_id = server.sim.dataset.clients[0]["id_servicio"]
    server.sim.set_ping_outcome(service_id, "all_replies")
    started = time.monotonic()
    task_id = _start_ping(server, service_id)
    first = server.client.get(f"/api/tasks/{task_id}/").json()
    assert first == {"task": {"status": "PROCESS", "result": None}}
    task = _final(server, task_id, timeout=2 + 10)
    assert time.monotonic() - started >= 2
    assert task["status"] == "SUCCESS"
    assert [next(iter(item)) for item in task["result"]] == [
        "ping-1",
        "ping-2",
        "ping-3",
        "ping-4",
        "ping-exitoso",
    ]
    assert server.client.get(f"/api/tasks/{task_id}/").json()["task"] == task


def test_all_replies_entries_have_routeros_strings(server: SimServer) -> None:
    task = _ping_run(server, "all_replies", 5)
    ip = server.sim.dataset.clients[0]["ip"]
    for entry in _entries(task["result"]):
        assert entry["host"] == ip
        assert (entry["sent"], entry["received"], entry["packet-loss"]) == ("1", "1", "0")
        assert entry["time"].endswith(("us", "ms")) and entry["time"][0].isdigit()
        assert {"ttl", "size", "seq", "min-rtt", "avg-rtt", "max-rtt"} <= set(entry)
        assert all(isinstance(value, str) for value in entry.values())
    assert task["result"][-1] == {"ping-exitoso": "5 de 5"}


@pytest.mark.parametrize(
    ("kind", "pings", "lost", "exitoso"),
    [
        ("loss_10", 10, 1, "9 de 10"),
        ("loss_10", 20, 2, "18 de 20"),
        ("loss_10", 4, 1, "3 de 4"),
        ("half_lost", 10, 5, "5 de 10"),
        ("none", 4, 4, "0 de 4"),
    ],
)
def test_loss_kinds(server: SimServer, kind: str, pings: int, lost: int, exitoso: str) -> None:
    task = _ping_run(server, kind, pings)
    entries = _entries(task["result"])
    timeouts = [e for e in entries if e["received"] == "0"]
    assert len(entries) == pings and len(timeouts) == lost
    assert all(e["status"] == "timeout" and e["packet-loss"] == "100" for e in timeouts)
    assert all("time" not in e for e in timeouts)
    assert task["result"][-1] == {"ping-exitoso": exitoso}


def test_unreachable_is_miscounted_as_success(server: SimServer) -> None:
    task = _ping_run(server, "unreachable", 3)
    entries = _entries(task["result"])
    assert all(e["status"] == "host unreachable" and e["received"] == "0" for e in entries)
    assert task["result"][-1] == {"ping-exitoso": "3 de 3"}


def test_mixed_hosts_alternate(server: SimServer) -> None:
    task = _ping_run(server, "mixed_hosts", 4)
    hosts = [e["host"] for e in _entries(task["result"])]
    private = server.sim.dataset.clients[0]["ip"]
    assert hosts[0] == hosts[2] == private
    assert hosts[1] == hosts[3] != private and not hosts[1].startswith(("10.", "172.", "192."))
    assert task["result"][-1] == {"ping-exitoso": "4 de 4"}


def test_router_error_entries_are_text(server: SimServer) -> None:
    task = _ping_run(server, "router_error", 3)
    entries = _entries(task["result"])
    assert all(isinstance(e, str) and "input does not match any value" in e for e in entries)
    assert all(e.startswith("('Error") for e in entries)
    assert task["result"][-1] == {"ping-exitoso": "0 de 3"}


@pytest.mark.parametrize(
    ("kind", "status", "result_type"),
    [
        ("failure", "FAILURE", str),
        ("malformed", "SUCCESS", dict),
        ("malformed_text", "SUCCESS", str),
    ],
)
def test_failure_and_malformed(
    server: SimServer, kind: str, status: str, result_type: type
) -> None:
    task = _ping_run(server, kind)
    assert task["status"] == status and isinstance(task["result"], result_type)


def test_arp_ping_targets_the_mac(server: SimServer) -> None:
    client = server.sim.dataset.clients[0]
    server.sim.set_ping_outcome(client["id_servicio"], "all_replies")
    response = server.client.post(
        f"/api/clientes/{client['id_servicio']}/ping/", json={"pings": 2, "arp_ping": True}
    )
    task = _final(server, response.json()["task_id"])
    assert {e["host"] for e in _entries(task["result"])} == {client["mac_cpe"]}


def test_default_outcome_follows_the_service_id(server: SimServer) -> None:
    assert default_kind(107) == "loss_10" and default_kind(113) == "half_lost"
    assert default_kind(129) == "none" and default_kind(101) == "all_replies"
    kinds = [default_kind(c["id_servicio"]) for c in server.sim.dataset.clients]
    assert kinds.count("all_replies") > len(kinds) * 0.8
    loss = next(
        c for c in server.sim.dataset.clients if default_kind(c["id_servicio"]) == "loss_10"
    )
    task = _final(server, _start_ping(server, loss["id_servicio"], 10))
    assert task["result"][-1] == {"ping-exitoso": "9 de 10"}


def test_control_endpoint_sets_outcome_for_one_or_all(server: SimServer) -> None:
    first, second = (c["id_servicio"] for c in server.sim.dataset.clients[:2])
    put = server.client.put(
        f"{server.url}/_sim/ping-outcome", json={"service_id": first, "kind": "none", "duration": 0}
    )
    assert put.status_code == 200 and put.json()["overrides"] == {str(first): "none"}
    assert _final(server, _start_ping(server, first))["result"][-1] == {"ping-exitoso": "0 de 4"}
    server.client.put(
        f"{server.url}/_sim/ping-outcome", json={"service_id": None, "kind": "failure"}
    )
    assert _final(server, _start_ping(server, second))["status"] == "FAILURE"
    bad = server.client.put(f"{server.url}/_sim/ping-outcome", json={"kind": "sideways"})
    assert bad.status_code == 400


@pytest.mark.parametrize("pings", [0, -1, 101, "x", None, True, 2.5])
def test_bad_pings_are_400(server: SimServer, pings: Any) -> None:
    service_id = server.sim.dataset.clients[0]["id_servicio"]
    body = {} if pings is None else {"pings": pings}
    response = server.client.post(f"/api/clientes/{service_id}/ping/", json=body)
    assert response.status_code == 400 and "pings" in response.json()


def test_ping_unknown_client_and_unknown_task_are_404(server: SimServer) -> None:
    assert server.client.post("/api/clientes/999999/ping/", json={"pings": 4}).status_code == 404
    missing = server.client.get("/api/tasks/00000000-0000-4000-8000-000000000000/")
    assert missing.status_code == 404 and "detail" in missing.json()


def test_plan_list_and_details(server: SimServer) -> None:
    response = server.client.get("/api/plan-internet/", params={"limit": 100})
    assert response.status_code == 200
    body = response.json()
    plans = body["results"]
    assert body["count"] == len(plans) == 12 and body["next"] is None
    assert all(set(plan) == {"id", "nombre", "tipo"} for plan in plans)
    by_type = {plan["tipo"]: plan["id"] for plan in plans}
    assert set(by_type) == {"PPPOE", "SIMPLE QUEUE", "PCQ"}
    pppoe = server.client.get(f"/api/plan-internet/pppoe/{by_type['PPPOE']}/")
    assert pppoe.status_code == 200
    assert set(pppoe.json()) == {"id", "nombre", "precio", "bajada", "subida"}
    assert pppoe.json()["precio"].endswith(".00")
    queue = server.client.get(f"/api/plan-internet/queue/{by_type['SIMPLE QUEUE']}/")
    assert queue.status_code == 200 and queue.json()["id"] == by_type["SIMPLE QUEUE"]
    speeds = {p["bajada"] for p in server.sim.dataset.plans}
    assert any(s.endswith("M") for s in speeds) and any(s.isdigit() for s in speeds)


def test_plan_detail_wrong_type_pcq_and_unknown_are_404(server: SimServer) -> None:
    plans = {p["tipo"]: p["id"] for p in server.sim.dataset.plans}
    for path in (
        f"/api/plan-internet/queue/{plans['PPPOE']}/",
        f"/api/plan-internet/pppoe/{plans['SIMPLE QUEUE']}/",
        f"/api/plan-internet/pppoe/{plans['PCQ']}/",
        f"/api/plan-internet/queue/{plans['PCQ']}/",
        "/api/plan-internet/pppoe/999/",
    ):
        assert server.client.get(path).status_code == 404, path


def test_plan_list_default_page_is_small(server: SimServer) -> None:
    body = server.client.get("/api/plan-internet/").json()
    assert len(body["results"]) == 10
    assert body["next"] == f"{server.url}/api/plan-internet/?limit=10&offset=10"


def test_every_kind_is_tested() -> None:
    covered = {"all_replies", "loss_10", "half_lost", "none", "unreachable", "mixed_hosts"}
    covered |= {"router_error", "failure", "malformed", "malformed_text"}
    assert covered == set(PING_KINDS)
