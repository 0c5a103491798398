"""`isp-gateway serve --workers 2` as a real process: whichever worker answers the scrape
reports the counts of both (prometheus-client's multiprocess mode), on the API port or on
METRICS_PORT."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Simulator, required_env, serve_env
from tests.support import base_env, free_port, run_cli, serving_workers, wait_until

CLIENTS = "GET /api/clientes/"


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    # A new connection each time, so that either worker may answer.
    response = httpx.get(f"{url}/metrics", timeout=10, headers={"Connection": "close"})
    assert response.status_code == 200, response.text
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def upstream_calls(samples: dict[tuple[str, frozenset[tuple[str, str]]], float]) -> float:
    return sum(
        v
        for (name, labels), v in samples.items()
        if name == "isp_gateway_upstream_requests_total" and ("endpoint", CLIENTS) in labels
    )


def test_any_worker_reports_all_workers(
    simulator: Simulator, password_hash: str, tmp_path: Path
) -> None:
    directory = tmp_path / "metrics"
    directory.mkdir()
    # Left over from an earlier run: `serve` must clear it, or the scrape would fail on it.
    (directory / "counter_1.db").write_bytes(b"not a sample file")
    env = serve_env(simulator.url, password_hash, PROMETHEUS_MULTIPROC_DIR=str(directory))
    with serving_workers(env, tmp_path, "/health") as url:
        health = 1  # the /health that answered the start-up wait
        # Each worker (no shared store) loads the client list itself: the upstream sees
        # both loads, and a scrape answered by either worker must count both.
        wait_for_both_loads(simulator, url)
        for _ in range(30):
            response = httpx.get(f"{url}/health", headers={"Connection": "close"}, timeout=10)
            assert response.status_code == 200
            health += 1
        pids = {p.name.split("_")[-1] for p in directory.glob("*.db")}
        assert len(pids) >= 2, "both workers write samples to the shared directory"
        # Each worker hands its request counts to the shared files within a second.
        key = frozenset({("route", "/health"), ("method", "GET"), ("status", "200")})
        wait_until(
            lambda: scrape(url).get(("isp_gateway_requests_total", key)) == health,
            timeout=5,
            interval=0.1,
            message="every /health to be counted",
        )
        for _ in range(6):
            samples = scrape(url)
            assert upstream_calls(samples) == simulator.state.calls[CLIENTS]
            assert samples[("isp_gateway_requests_total", key)] == health


def wait_for_both_loads(simulator: Simulator, metrics_url: str) -> None:
    wait_until(
        lambda: simulator.state.calls[CLIENTS] >= 2 and upstream_calls(scrape(metrics_url)) >= 2,
        timeout=60,
        interval=0.1,
        message="the workers to both load the list",
    )


def test_metrics_on_their_own_port_report_all_workers_and_leave_the_api_port(
    simulator: Simulator, password_hash: str, tmp_path: Path
) -> None:
    port = free_port()
    env = serve_env(simulator.url, password_hash, METRICS_PORT=str(port))
    with serving_workers(env, tmp_path, "/ready") as url:
        # Off the public port, on every worker: fresh connections reach either.
        close = {"Connection": "close"}
        api = {httpx.get(f"{url}/metrics", headers=close).status_code for _ in range(8)}
        assert api == {404}
        metrics_url = f"http://127.0.0.1:{port}"
        wait_for_both_loads(simulator, metrics_url)
        for _ in range(6):
            assert upstream_calls(scrape(metrics_url)) == simulator.state.calls[CLIENTS]
        # A scrape's port answers nothing else.
        assert httpx.get(f"{metrics_url}/health", timeout=10).status_code == 404
        assert httpx.post(f"{metrics_url}/metrics", timeout=10).status_code == 405


def test_serve_refuses_a_metrics_port_it_cannot_have(password_hash: str, tmp_path: Path) -> None:
    port = free_port()
    env = base_env(**required_env(password_hash), METRICS_PORT=str(port))
    same = run_cli("serve", "--port", str(port), env=env, cwd=tmp_path)
    assert same.returncode == 2
    assert f"METRICS_PORT {port} is the API port" in same.stderr
    # Another process listens there: the workers' shared port would be shared with it too.
    with socket.create_server(("127.0.0.1", port)):
        taken = run_cli("serve", "--port", str(free_port()), env=env, cwd=tmp_path)
    assert taken.returncode == 1
    assert f"cannot listen on METRICS_HOST:METRICS_PORT 127.0.0.1:{port}" in taken.stderr
