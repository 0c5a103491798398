"""Issue 28, running it: `serve` refuses a port in use (granian and uvicorn, one worker or
several) and `UPSTREAM_NET_HOST` ending in /api is refused, both as real subprocesses."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.foundation.conftest import required_env
from tests.foundation.test_cli import base_env, run_cli
from tests.support import free_port, serving


def serve_once(env: dict[str, str], cwd: Path, *args: str) -> tuple[int, str]:
    """`isp-gateway serve *args`: its exit status and stderr. One that does not stop by
    itself within 20 s (it started serving) is stopped with SIGINT and fails the test."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "isp_gateway", "serve", *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, err = proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)  # not SIGKILL: granian's workers would outlive it
        _, err = proc.communicate(timeout=30)
        pytest.fail(f"serve started on a port in use instead of refusing it:\n{err[-2000:]}")
    return proc.returncode, err


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("server", ["granian", "uvicorn"])
def test_serve_refuses_a_port_in_use(
    tmp_path: Path, password_hash: str, server: str, workers: int
) -> None:
    env = base_env(**required_env(password_hash), SERVER=server)
    with socket.socket() as busy:
        # As a running granian holds its port: with SO_REUSEPORT, which a second granian
        # would share silently.
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        busy.bind(("127.0.0.1", free_port()))
        busy.listen()
        port = busy.getsockname()[1]
        status, err = serve_once(env, tmp_path, "--port", str(port), "--workers", str(workers))
    assert status == 1
    assert err.strip().splitlines() == [
        f"isp-gateway: cannot listen on 127.0.0.1:{port}: already in use (another "
        "isp-gateway, or another service, listens there); stop it or choose another --port"
    ]


def test_a_second_serve_on_the_port_of_a_running_one_is_refused(
    tmp_path: Path, password_hash: str
) -> None:
    env = base_env(**required_env(password_hash))  # granian, the default, both times
    with serving(env, tmp_path) as first:
        port = int(first.url.rsplit(":", 1)[1])
        status, err = serve_once(env, tmp_path, "--port", str(port))
    assert status == 1
    assert f"cannot listen on 127.0.0.1:{port}: already in use" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "host", ["https://isp.example.com/api", "https://isp.example.com/api/", "http://h:8000/API"]
)
def test_an_upstream_host_ending_in_api_is_refused(
    tmp_path: Path, password_hash: str, host: str
) -> None:
    env = base_env(**{**required_env(password_hash), "UPSTREAM_NET_HOST": host})
    result = run_cli("check-config", env=env, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "isp-gateway: invalid configuration: UPSTREAM_NET_HOST: must be the backend's base "
        "address without /api (the service adds api/... itself), e.g. https://api.wisphub.net"
    ]
    # A path that only contains "api" elsewhere is a base address like any other.
    env["UPSTREAM_NET_HOST"] = "https://isp.example.com/apis/wisp"
    assert run_cli("check-config", env=env, cwd=tmp_path).returncode == 0
