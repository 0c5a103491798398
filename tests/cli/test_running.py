"""Issue 28, running it: `serve` refuses a port in use (granian and uvicorn, one worker or
several) and `UPSTREAM_NET_HOST` ending in /api is refused, both as real subprocesses."""

from __future__ import annotations

import argparse
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest

from isp_gateway.auth import keys
from isp_gateway.cli import build_parser
from tests.conftest import required_env
from tests.support import RedisServer, base_env, free_port, run_cli, serving


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


# -- the command line's own help (point 21) ---------------------------------------------------


def parsers(
    parser: argparse.ArgumentParser, name: str = "isp-gateway"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every (sub)command's parser, by its command line."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from parsers(sub, f"{name} {sub_name}")


def test_the_version_comes_from_the_package(tmp_path: Path) -> None:
    result = run_cli("--version", env=base_env(), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"isp-gateway {version('isp-gateway')}"


def test_every_option_has_help_with_its_default() -> None:
    missing = []
    for name, parser in parsers(build_parser()):
        formatter = parser._get_formatter()
        for action in parser._actions:
            if not action.option_strings or isinstance(
                action, argparse._HelpAction | argparse._VersionAction
            ):
                continue
            shown = formatter._expand_help(action) if action.help else ""
            # A required option has no default: its help must still say what it takes.
            if not shown or (not action.required and "default" not in shown):
                missing.append(f"{name} {action.option_strings[-1]}: {shown!r}")
    assert missing == []


def test_serve_and_demo_help_show_their_defaults(tmp_path: Path) -> None:
    def shown(*command: str) -> str:  # argparse wraps lines at the terminal's width
        return " ".join(run_cli(*command, "--help", env=base_env(), cwd=tmp_path).stdout.split())

    serve = shown("serve")
    assert "(default: ISP_GATEWAY_PORT, 8000)" in serve
    assert "(default: ISP_GATEWAY_HOST, 127.0.0.1)" in serve
    assert "(default: 1)" in serve  # --workers
    demo = shown("demo")
    assert "(default: 2000)" in demo and "(default: 0.3,0.6)" in demo


def test_keys_create_help_lists_every_scope_on_a_line_of_its_own(tmp_path: Path) -> None:
    result = run_cli("keys", "create", "--help", env=base_env(), cwd=tmp_path)
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    for scope in (*keys.SCOPES, keys.ALL_SCOPES):
        described = [line for line in lines if re.fullmatch(rf"\s+{re.escape(scope)}\s+\w.+", line)]
        assert len(described) == 1, (scope, result.stdout)


@pytest.mark.parametrize("password", ["hunter2", "eleven-char"])
def test_hash_password_refuses_a_short_password(tmp_path: Path, password: str) -> None:
    result = run_cli("hash-password", env=base_env(), cwd=tmp_path, stdin=password + "\n")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.strip() == (
        "isp-gateway: the password is too short: at least 12 characters (it is typed once, "
        "into the bot's configuration: make it long)"
    )
    assert password not in result.stderr
    twelve = run_cli("hash-password", env=base_env(), cwd=tmp_path, stdin="twelve-chars\n")
    assert twelve.returncode == 0 and twelve.stdout.startswith("$2b$")


def test_serve_refuses_a_redis_url_that_is_a_read_only_replica(
    tmp_path: Path, password_hash: str, own_redis: RedisServer
) -> None:
    """A replica answers the start-up ping and refuses every write: `serve` started on it,
    and answered logins and nearly every request 503 store_unavailable."""
    replica = RedisServer(replica_of=own_redis.port, directory=tmp_path)
    replica.start()
    try:
        env = base_env(**required_env(password_hash), REDIS_URL=replica.url + "/0")
        status, err = serve_once(env, tmp_path, "--port", str(free_port()))
    finally:
        replica.stop()
    assert status == 1
    assert err.strip().splitlines() == [
        "isp-gateway: the Redis of REDIS_URL is a read-only replica (it refuses writes); "
        "name its master, or use REDIS_SENTINELS to follow failovers"
    ]


@pytest.mark.parametrize("host", ["192.0.2.77", "no-such-host.invalid"])
def test_a_host_that_is_no_address_of_this_machine_names_the_host_setting(
    tmp_path: Path, password_hash: str, host: str
) -> None:
    """ISP_GATEWAY_HOST set to another host's address (or a name that resolves to nothing)
    was refused with 'stop it or choose another --port', which names the wrong setting."""
    env = base_env(**required_env(password_hash), ISP_GATEWAY_HOST=host)
    status, err = serve_once(env, tmp_path, "--port", str(free_port()))
    assert status == 1
    (line,) = err.strip().splitlines()
    assert line.startswith(f"isp-gateway: cannot listen on {host}:")
    assert line.endswith("; --host (else ISP_GATEWAY_HOST) must be an address of this host")
