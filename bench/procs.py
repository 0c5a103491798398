"""Start the simulator, the gateway and the baseline as real processes on loopback."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

API_KEY = "bench-upstream-key-0123456789abcdef"
JWT_SECRET = "bench-jwt-secret-0123456789abcdef0123456789"
USERNAME = "bench"
PASSWORD = "bench-password"
SERVER = "granian"  # the shipped default of SERVER (settings.py)


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
def process(
    args: list[str],
    env: dict[str, str],
    output: IO[bytes] | int | None = None,
    *,
    drop: frozenset[str] = frozenset(),
    cwd: str | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    inherited = {k: v for k, v in os.environ.items() if k not in drop}
    proc = subprocess.Popen(args, env={**inherited, **env}, stdout=output, stderr=output, cwd=cwd)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


@dataclass(frozen=True)
class Served:
    """A server under test: its URL, and its process for reading the CPU it spends."""

    url: str
    pid: int

    def cpu_seconds(self) -> float:
        """CPU time (user + system) of the process and its live descendants (workers)."""
        total = 0.0
        pending = [self.pid]
        while pending:
            pid = pending.pop()
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{pid}/stat").read_text()
                fields = stat[stat.rindex(")") + 2 :].split()
                total += (int(fields[11]) + int(fields[12])) / _TICKS
                for task in Path(f"/proc/{pid}/task").iterdir():
                    pending += [int(c) for c in (task / "children").read_text().split()]
        return total


_TICKS = os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def simulator(clients: int, *flags: str, timeout: float = 180) -> Iterator[str]:
    """`isp-gateway simulator` with `clients` (seed 7) and any further command-line flags;
    `timeout` covers generating the data."""
    port = free_port()
    args = [sys.executable, "-m", "isp_gateway", "simulator", "--port", str(port)]
    args += ["--clients", str(clients), "--seed", "7", *flags]
    with process(args, {"SIMULATOR_API_KEY": API_KEY}):
        url = f"http://127.0.0.1:{port}"
        wait_until(f"{url}/_sim/stats", timeout=timeout)
        yield url


def gateway_env(upstream: str) -> dict[str, str]:
    """The upstream and the secrets; every other setting keeps its shipped default."""
    from isp_gateway.auth.passwords import hash_password

    return {
        "UPSTREAM_NET_KEY": API_KEY,
        "UPSTREAM_NET_HOST": upstream,
        "JWT_SECRET_KEY": JWT_SECRET,
        "API_USERNAME": USERNAME,
        "API_PASSWORD_HASH": hash_password(PASSWORD),
    }


@contextlib.contextmanager
def gateway(
    upstream: str, *serve_args: str, log: IO[bytes] | None = None, **env: str
) -> Iterator[Served]:
    """`isp-gateway serve` exactly as a user starts it; its logs go to `log` (a file, as
    under a process supervisor) so the access log is really written."""
    from isp_gateway.settings import Settings

    port = free_port()
    args = [sys.executable, "-m", "isp_gateway", "serve", "--port", str(port), *serve_args]
    # The shipped defaults: no setting from the caller's shell, and no `.env` (another cwd).
    settings_names = frozenset(Settings.model_fields)
    with (
        tempfile.TemporaryDirectory() as cwd,
        process(args, {**gateway_env(upstream), **env}, log, drop=settings_names, cwd=cwd) as proc,
    ):
        url = f"http://127.0.0.1:{port}"
        wait_until(f"{url}/health")
        yield Served(url, proc.pid)


def server_times(*logs: Path, ok: tuple[int, ...]) -> dict[str, list[float]]:
    """The gateway's access-log server times of the answers with an `ok` status, by label
    (the request id without its number)."""
    times: dict[str, list[float]] = {}
    for path in logs:
        for line in path.read_text(errors="replace").splitlines():
            if '"duration_ms"' not in line:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            label = str(entry.get("request_id", "")).rsplit("-", 1)[0]
            if entry.get("status") in ok:
                times.setdefault(label, []).append(float(entry["duration_ms"]))
    return times


@contextlib.contextmanager
def bare(body_file: str, server: str = "uvicorn") -> Iterator[Served]:
    """The bare Starlette app under uvicorn or granian, one worker, the server's default
    event loop (uvloop when installed), its access log off."""
    port = free_port()
    if server == "granian":
        args = [
            *(sys.executable, "-m", "granian", "--interface", "asgi", "--factory"),
            *("--port", str(port), "--log-level", "warning", "--no-access-log"),
            "bench.bare:create_app",
        ]
    else:
        args = [
            *(sys.executable, "-m", "uvicorn", "bench.bare:create_app", "--factory"),
            *("--port", str(port), "--log-level", "warning", "--no-access-log"),
        ]
    with process(args, {"BENCH_BODY_FILE": body_file}) as proc:
        url = f"http://127.0.0.1:{port}"
        wait_until(f"{url}/api/v1/clients/by-document/1")
        yield Served(url, proc.pid)


@contextlib.contextmanager
def redis_server() -> Iterator[str]:
    """A throwaway Redis on a free port, nothing saved: never the machine's own."""
    port = free_port()
    args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1"]
    args += ["--save", "", "--appendonly", "no"]
    with process(args, {}, subprocess.DEVNULL):
        deadline = time.monotonic() + 30
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("redis-server did not come up")
            time.sleep(0.1)
        yield f"redis://127.0.0.1:{port}/0"
