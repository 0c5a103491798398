"""`isp-gateway serve --workers 2` as a real process: whichever worker answers the scrape
reports the counts of both (prometheus-client's multiprocess mode)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import API_KEY, JWT_SECRET, USERNAME, Simulator
from tests.support import free_port

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
    port = free_port()
    env = {
        **os.environ,
        "UPSTREAM_NET_KEY": API_KEY,
        "UPSTREAM_NET_HOST": simulator.url,
        "JWT_SECRET_KEY": JWT_SECRET,
        "API_USERNAME": USERNAME,
        "API_PASSWORD_HASH": password_hash,
        "UPSTREAM_RATE_PER_MINUTE": "100000",
        "UPSTREAM_RATE_PER_HOUR": "1000000",
        "LOG_LEVEL": "WARNING",
        "PROMETHEUS_MULTIPROC_DIR": str(directory),
    }
    env.pop("REDIS_URL", None)
    args = [sys.executable, "-m", "isp_gateway", "serve", "--port", str(port), "--workers", "2"]
    # cwd: no stray .env file is read.
    proc = subprocess.Popen(args, env=env, cwd=tmp_path)
    url = f"http://127.0.0.1:{port}"
    try:
        health = 0
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, "serve exited"
            try:
                if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                    health += 1
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "serve did not come up"
            time.sleep(0.2)
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
    finally:
        proc.terminate()
        proc.wait(timeout=30)
