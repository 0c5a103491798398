"""`isp-gateway serve --workers 2` as a real process: whichever worker answers the scrape
reports the counts of both (prometheus-client's multiprocess mode)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Simulator, serve_env
from tests.support import serving_workers

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
        deadline = time.monotonic() + 60
        while simulator.state.calls[CLIENTS] < 2 or upstream_calls(scrape(url)) < 2:
            assert time.monotonic() < deadline, "the workers did not both load the list"
            time.sleep(0.2)
        for _ in range(30):
            response = httpx.get(f"{url}/health", headers={"Connection": "close"}, timeout=10)
            assert response.status_code == 200
            health += 1
        pids = {p.name.split("_")[-1] for p in directory.glob("*.db")}
        assert len(pids) >= 2, "both workers write samples to the shared directory"
        # Each worker hands its request counts to the shared files within a second.
        time.sleep(2.5)
        key = frozenset({("route", "/health"), ("method", "GET"), ("status", "200")})
        for _ in range(6):
            samples = scrape(url)
            assert upstream_calls(samples) == simulator.state.calls[CLIENTS]
            assert samples[("isp_gateway_requests_total", key)] == health
