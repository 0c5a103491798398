"""Start the simulator, the gateway and the baseline as real processes on loopback."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

API_KEY = "bench-upstream-key-0123456789abcdef"
JWT_SECRET = "bench-jwt-secret-0123456789abcdef0123456789"
USERNAME = "bench"
PASSWORD = "bench-password"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until(url: str, headers: dict[str, str] | None = None, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, headers=headers, timeout=5).status_code < 500:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up")


@contextlib.contextmanager
def process(args: list[str], env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(args, env={**os.environ, **env})
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


@contextlib.contextmanager
def simulator(clients: int, **extra: Any) -> Iterator[str]:
    port = free_port()
    args = [
        sys.executable,
        "-m",
        "isp_gateway",
        "simulator",
        "--port",
        str(port),
        "--clients",
        str(clients),
        "--seed",
        "7",
    ]
    with process(args, {"SIMULATOR_API_KEY": API_KEY}):
        url = f"http://127.0.0.1:{port}"
        wait_until(f"{url}/_sim/stats", timeout=180)
        yield url


def gateway_env(upstream: str) -> dict[str, str]:
    from isp_gateway.auth.passwords import hash_password

    return {
        "UPSTREAM_NET_KEY": API_KEY,
        "UPSTREAM_NET_HOST": upstream,
        "JWT_SECRET_KEY": JWT_SECRET,
        "API_USERNAME": USERNAME,
        "API_PASSWORD_HASH": hash_password(PASSWORD),
        "LOG_LEVEL": "WARNING",
    }


@contextlib.contextmanager
def gateway_process(upstream: str, **env: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`isp-gateway serve` (one process) with extra settings: its URL and the process."""
    port = free_port()
    args = [sys.executable, "-m", "isp_gateway", "serve", "--port", str(port)]
    with process(args, {**gateway_env(upstream), **env}) as proc:
        url = f"http://127.0.0.1:{port}"
        wait_until(f"{url}/health")
        yield url, proc


@contextlib.contextmanager
def gateway(upstream: str, **env: str) -> Iterator[str]:
    with gateway_process(upstream, **env) as (url, _):
        yield url


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def bare(body_file: str) -> Iterator[str]:
    port = free_port()
    # The same server settings as `isp-gateway serve`: one uvicorn worker, uvloop and
    # httptools when installed, access log off.
    args = [
        sys.executable,
        "-m",
        "uvicorn",
        "bench.bare:create_app",
        "--factory",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--no-access-log",
    ]
    with process(args, {"BENCH_BODY_FILE": body_file}):
        url = f"http://127.0.0.1:{port}"
        wait_until(f"{url}/api/v1/clients/by-document/1")
        yield url
