"""deploy/isp-gateway@.service: `systemd-analyze verify` passes on it (a copy running this
checkout's `isp-gateway` as the user running the tests, since verify wants the binary to
exist), its hardening rates "OK" in `systemd-analyze security`, and it stops the gateway the
way the gateway stops gracefully, with time for the longest request. The nginx test runs
the replicas with the unit's own ExecStart."""

from __future__ import annotations

import grp
import os
import pwd
import subprocess
from pathlib import Path

import httpx
import pytest

from isp_gateway.serving import graceful_stop_seconds
from isp_gateway.settings import Settings
from tests.conftest import serve_env
from tests.deploy.conftest import (
    DEPLOY,
    SHIPPED_BINARY,
    UNIT,
    render,
    unit_command,
    venv_binary,
)
from tests.support import free_port, needs, server_process, tool_or_skip, wait_ready

# The overall exposure `systemd-analyze security` may give, in its tenths (2.0 and below
# rate "OK"; the unit scores 1.5 today).
MAX_EXPOSURE = 20


def unit_settings(section: str) -> dict[str, list[str]]:
    """The keys of a section of the unit and their values."""
    current = ""
    values: dict[str, list[str]] = {}
    for line in (DEPLOY / UNIT).read_text().splitlines():
        line = line.strip()
        if line.startswith("["):
            current = line
        elif current == section and "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            values.setdefault(key, []).append(value)
    return values


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    tool = tool_or_skip("systemd-analyze", "systemd")
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=120)


@needs("systemd-analyze", "systemd")
def test_the_unit_verifies(tmp_path: Path) -> None:
    user = pwd.getpwuid(os.getuid()).pw_name
    group = grp.getgrgid(os.getgid()).gr_name
    text = render(
        UNIT,
        {
            SHIPPED_BINARY: venv_binary(),
            "User=isp-gateway": f"User={user}",
            "Group=isp-gateway": f"Group={group}",
        },
    )
    unit = tmp_path / UNIT.replace("@", "@8001")  # an instance, as docs/deployment.md starts them
    unit.write_text(text)
    result = analyze("verify", str(unit))
    # Only what it says about this unit (it also reads the units named in After=).
    said = [line for line in (result.stdout + result.stderr).splitlines() if "isp-gateway" in line]
    assert result.returncode == 0 and not said, result.stdout + result.stderr


@needs("systemd-analyze", "systemd")
def test_the_unit_is_hardened() -> None:
    result = analyze("security", "--offline=yes", f"--threshold={MAX_EXPOSURE}", str(DEPLOY / UNIT))
    assert result.returncode == 0, result.stdout[-1500:] + result.stderr
    service = unit_settings("[Service]")
    assert service["User"] == ["isp-gateway"]
    for setting in ("NoNewPrivileges", "PrivateTmp", "ProtectHome", "RestrictSUIDSGID"):
        assert service[setting] == ["yes"], setting
    assert service["ProtectSystem"] == ["strict"]
    assert service["CapabilityBoundingSet"] == [""]


def test_the_unit_runs_and_stops_the_gateway_as_it_expects() -> None:
    service = unit_settings("[Service]")
    assert service["EnvironmentFile"] == ["/etc/isp-gateway/env"]
    (command,) = service["ExecStart"]
    assert command.startswith(f"{SHIPPED_BINARY} serve ")
    assert "--proxy-headers" in command.split()  # behind deploy/nginx.conf
    assert service["Restart"] == ["on-failure"]
    # SIGTERM to the server's parent alone: it stops its workers gracefully itself.
    assert service["KillSignal"] == ["SIGTERM"]
    assert service["KillMode"] == ["mixed"]
    # Past the graceful window (longer than the longest request, a long poll plus one
    # upstream call), granian kills a worker that has not stopped and uvicorn cancels its
    # requests: systemd waits longer still before its SIGKILL.
    window = graceful_stop_seconds(Settings.model_fields["UPSTREAM_TIMEOUT_SECONDS"].default)
    (stop,) = service["TimeoutStopSec"]
    assert int(stop) > window + 5


def test_the_unit_needs_the_network_and_no_local_redis() -> None:
    """Issue 28: `After=redis-server.service` tied the gateway to a Redis on its own host,
    which a two-host Sentinel deployment does not have."""
    unit = unit_settings("[Unit]")
    assert unit["After"] == ["network-online.target"]
    assert unit["Wants"] == ["network-online.target"]
    for key in ("Requires", "BindsTo", "PartOf", "Requisite"):
        assert key not in unit, key
    assert not [v for values in unit.values() for v in values if "redis" in v.lower()]


def test_the_unit_listens_where_its_environment_file_says(
    tmp_path: Path, password_hash: str
) -> None:
    """Issue 28: the unit hard-coded `--host 127.0.0.1`; behind an nginx on another host the
    gateway listens on its private address, ISP_GATEWAY_HOST in /etc/isp-gateway/env."""
    (command,) = unit_settings("[Service]")["ExecStart"]
    assert "--host" not in command.split()
    assert "--port %i" in command
    port = free_port()
    env = serve_env("http://127.0.0.1:9", password_hash, ISP_GATEWAY_HOST="127.0.0.2")
    with server_process(unit_command(port), env, tmp_path) as proc:
        wait_ready(f"http://127.0.0.2:{port}", proc, "/health")
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
