"""Fault injection (each kind, scoped) and the /_sim/ control endpoints."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import httpx
import pytest

from isp_gateway.simulator import Faults, add_simulator_arguments, config_from_args
from tests.simulator.conftest import SimServer, StartSim


def _set_faults(server: SimServer, **values: object) -> dict[str, object]:
    response = server.client.put(f"{server.url}/_sim/faults", json=values)
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


def test_latency(server: SimServer) -> None:
    # A whole second of latency: a request after the reset answers sooner than that even
    # when the test process stalls (up to a second on a loaded CI machine).
    _set_faults(server, latency=[1.0, 1.2])
    started = time.monotonic()
    assert server.client.get("/api/plan-internet/").status_code == 200
    assert 1.0 <= time.monotonic() - started < 5
    _set_faults(server, reset=True)
    started = time.monotonic()
    server.client.get("/api/plan-internet/")
    assert time.monotonic() - started < 1.0


def test_error_rate_gives_500_html_or_json(server: SimServer) -> None:
    server.sim.faults.error_rate = 1.0
    responses = [server.client.get("/api/clientes/") for _ in range(12)]
    assert {r.status_code for r in responses} == {500}
    types = {r.headers["content-type"].split(";")[0] for r in responses}
    assert types == {"text/html", "application/json"}
    assert any(r.text.startswith("<!doctype html>") for r in responses)


def test_hang_never_answers_and_frees_the_server(server: SimServer) -> None:
    server.sim.faults.hang_rate = 1.0
    server.sim.faults.path_prefix = "/api/tickets/"
    with server.raw_client(timeout=0.5) as client, pytest.raises(httpx.ReadTimeout):
        client.get("/api/tickets/", headers={"Authorization": "Api-Key simulator-test-key"})
    # Other paths keep answering while one request hangs.
    assert server.client.get("/api/plan-internet/").status_code == 200


def test_force_403(server: SimServer) -> None:
    _set_faults(server, force_403=True)
    response = server.client.get("/api/clientes/")
    assert response.status_code == 403 and "detail" in response.json()


def test_force_429_with_retry_after(server: SimServer) -> None:
    _set_faults(server, force_429=True, retry_after=7)
    response = server.client.get("/api/clientes/")
    assert response.status_code == 429 and response.headers["retry-after"] == "7"


def test_rate_limit_per_minute(server: SimServer) -> None:
    _set_faults(server, rate_limit_per_minute=3)
    codes = [server.client.get("/api/plan-internet/").status_code for _ in range(5)]
    assert codes == [200, 200, 200, 429, 429]
    throttled = server.client.get("/api/plan-internet/")
    assert 1 <= int(throttled.headers["retry-after"]) <= 60
    # Control endpoints are never throttled.
    assert server.client.get(f"{server.url}/_sim/stats").status_code == 200


def test_garbage_is_200_with_invalid_json(server: SimServer) -> None:
    server.sim.faults.garbage = 1.0
    for _ in range(6):
        response = server.client.get("/api/clientes/")
        assert response.status_code == 200
        with pytest.raises(ValueError):  # JSONDecodeError or UnicodeDecodeError
            json.loads(response.content)


def test_fault_restricted_to_method_and_path(server: SimServer) -> None:
    _set_faults(server, error_rate=1.0, method="POST", path_prefix="/api/tickets/")
    assert server.client.get("/api/tickets/").status_code == 200
    assert server.client.get("/api/clientes/").status_code == 200
    assert server.client.post("/api/tickets/", json={}).status_code == 500
    assert server.sim.created_tickets == []


def test_each_fault_can_have_its_own_scope(server: SimServer) -> None:
    _set_faults(
        server,
        force_403=True,
        force_429=True,
        scopes={
            "force_403": {"path_prefix": "/api/clientes/"},
            "force_429": {"method": "GET", "path_prefix": "/api/plan-internet/"},
        },
    )
    assert server.client.get("/api/clientes/").status_code == 403
    assert server.client.get("/api/plan-internet/").status_code == 429
    assert server.client.get("/api/tickets/").status_code == 200


def test_faults_leave_control_endpoints_alone(server: SimServer) -> None:
    _set_faults(server, force_403=True, error_rate=1.0)
    assert server.client.get(f"{server.url}/_sim/stats").status_code == 200
    assert _set_faults(server, reset=True)["force_403"] is False
    assert server.sim.faults == Faults()
    assert server.client.get("/api/clientes/").status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        {"error_rate": 2},
        {"error_rate": "x"},
        {"latency": [1, 0.5]},
        {"force_403": "yes"},
        {"nope": 1},
        {"scopes": {"nope": {}}},
    ],
)
def test_bad_fault_settings_are_400_and_change_nothing(server: SimServer, body: object) -> None:
    response = server.client.put(f"{server.url}/_sim/faults", json=body)
    assert response.status_code == 400
    assert server.sim.faults == Faults()


def test_stats_count_calls_per_template(server: SimServer) -> None:
    server.client.get("/api/clientes/")
    server.client.get("/api/clientes/", params={"cedula": "1"})
    server.client.get("/api/clientes/101/")
    server.client.post("/api/clientes/101/ping/", json={"pings": 1})
    task_id = server.client.post("/api/clientes/101/ping/", json={"pings": 1}).json()["task_id"]
    server.client.get(f"/api/tasks/{task_id}/")
    with server.raw_client() as anonymous:
        anonymous.get("/api/tickets/")  # refused calls count too
    stats = server.client.get(f"{server.url}/_sim/stats").json()
    assert stats["calls"] == {
        "GET /api/clientes/": 2,
        "GET /api/clientes/{id}/": 1,
        "POST /api/clientes/{id}/ping/": 2,
        "GET /api/tasks/{id}/": 1,
        "GET /api/tickets/": 1,
    }
    assert stats["total"] == 7 and stats["created_tickets"] == 0 and stats["tasks"] == 2
    assert server.sim.calls["GET /api/clientes/"] == 2
    assert server.client.post(f"{server.url}/_sim/reset-stats").status_code == 200
    assert server.client.get(f"{server.url}/_sim/stats").json()["total"] == 0
    server.sim.reset_stats()
    assert sum(server.sim.calls.values()) == 0


def test_variants_endpoint_validates(server: SimServer) -> None:
    url = f"{server.url}/_sim/variants"
    assert server.client.get(url).json() == {
        "ticket_labels": "label",
        "answers": "list",
        "fecha_corte": "mixed",
        "phone_separators": True,
        "precio_plan": "mixed",
        "money": "string",
    }
    assert server.client.put(url, json={"answers": "object"}).json()["answers"] == "object"
    assert server.client.put(url, json={"ticket_labels": "roman"}).status_code == 400
    assert server.client.put(url, json={"phone_separators": 1}).status_code == 400
    assert server.client.put(url, json={"colour": "red"}).status_code == 400
    assert server.client.put(url, json={"reset": True}).json()["answers"] == "list"


def test_faults_are_deterministic_by_seed(start_sim: StartSim) -> None:
    def pattern(server: SimServer) -> list[int]:
        server.sim.faults.error_rate = 0.5
        return [server.client.get("/api/plan-internet/").status_code for _ in range(20)]

    first, second = pattern(start_sim(seed=4)), pattern(start_sim(seed=4))
    assert first == second and set(first) == {200, 500}


def test_cli_arguments_build_the_config() -> None:
    parser = argparse.ArgumentParser()
    add_simulator_arguments(parser)
    ns = parser.parse_args(
        [
            "--port",
            "9000",
            "--clients",
            "50",
            "--seed",
            "3",
            "--latency",
            "0.3,0.6",
            "--error-rate",
            "0.1",
            "--hang-rate",
            "0.05",
            "--force-403",
            "--rate-limit",
            "100/min",
            "--fault-method",
            "post",
            "--fault-path",
            "/api/tickets/",
            "--ticket-labels",
            "number",
            "--single-phone",
            "--money",
            "number",
        ]
    )
    config = config_from_args(ns, "key")
    assert ns.port == 9000 and ns.host == "127.0.0.1"
    assert (config.api_key, config.clients, config.seed, config.data_file) == ("key", 50, 3, None)
    faults = config.faults
    assert faults.latency == (0.3, 0.6) and faults.error_rate == 0.1 and faults.hang_rate == 0.05
    assert faults.force_403 and faults.rate_limit_per_minute == 100
    assert (faults.method, faults.path_prefix) == ("POST", "/api/tickets/")
    assert config.variants.ticket_labels == "number" and not config.variants.phone_separators
    assert config.variants.money == "number"
    defaults = config_from_args(parser.parse_args([]), "k")
    assert defaults.faults == Faults() and defaults.max_page_size == 1000
    with pytest.raises(SystemExit):
        parser.parse_args(["--error-rate", "1.5"])


def test_cli_arguments_keep_the_callers_host_flag() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="192.0.2.1")
    add_simulator_arguments(parser)
    ns = parser.parse_args(["--port", "1"])
    assert (ns.host, ns.port) == ("192.0.2.1", 1)


def test_data_file_serves_its_rows(start_sim: StartSim, tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    rows = [{"id_servicio": 7, "nombre": "ÚNICO CLIENTE", "cedula": "123", "estado": "Activo"}]
    path.write_text(json.dumps({"clients": rows}), "utf-8")
    server = start_sim(data_file=path)
    body = server.client.get("/api/clientes/").json()
    assert body["count"] == 1 and body["results"] == rows
    assert server.client.get("/api/tickets/").json()["count"] == 0


def test_short_page_ends_a_list_early_with_the_count_unchanged(server: SimServer) -> None:
    whole = server.client.get("/api/clientes/", params={"limit": 4}).json()
    assert whole["next"] is not None and len(whole["results"]) == 4
    _set_faults(server, short_page=True, scopes={"short_page": {"path_prefix": "/api/clientes/"}})
    short = server.client.get("/api/clientes/", params={"limit": 4}).json()
    assert short["count"] == whole["count"]
    assert short["next"] is None
    assert short["results"] == whole["results"][:2]
    one = server.client.get("/api/clientes/", params={"limit": 1}).json()
    assert one["results"] == [] and one["count"] == whole["count"]
    # Out of scope, a list is whole.
    assert server.client.get("/api/tickets/", params={"limit": 1}).json()["next"] is not None


@pytest.mark.parametrize(
    ("blank", "body"),
    [("bare", []), ("paged", {"count": 0, "next": None, "previous": None, "results": []})],
)
def test_blank_list_answers_a_list_read_with_no_rows(
    server: SimServer, blank: str, body: object
) -> None:
    _set_faults(server, blank_list=blank, scopes={"blank_list": {"path_prefix": "/api/router/"}})
    answer = server.client.get("/api/router/")
    assert (answer.status_code, answer.json()) == (200, body)
    # Out of scope, a list is whole; the control API says what is on.
    assert server.client.get("/api/clientes/", params={"limit": 1}).json()["results"]
    assert server.client.get("/_sim/faults").json()["blank_list"] == blank
    assert server.client.put("/_sim/faults", json={"blank_list": "half"}).status_code == 400


def test_unreadable_write_answers_200_and_changes_nothing(server: SimServer) -> None:
    row = server.client.get("/api/clientes/", params={"limit": 1}).json()["results"][0]
    ident = row["id_servicio"]
    _set_faults(server, unreadable_write=True)
    response = server.client.patch(f"/api/clientes/{ident}/perfil/", json={"telefono": "5550001"})
    assert response.status_code == 200
    with pytest.raises(ValueError):
        response.json()
    # Reads are untouched; the write never happened.
    again = server.client.get("/api/clientes/", params={"id_servicio": ident}).json()["results"]
    assert again[0]["telefono"] == row["telefono"]


def test_cli_flags_for_short_pages_and_unreadable_writes() -> None:
    parser = argparse.ArgumentParser()
    add_simulator_arguments(parser)
    faults = config_from_args(
        parser.parse_args(["--short-page", "--unreadable-write"]), "key"
    ).faults
    assert faults.short_page and faults.unreadable_write
    assert faults.as_dict()["short_page"] is True
