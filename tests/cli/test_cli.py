"""The command line, run as a real subprocess: check-config, hash-password, serve, demo."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import bcrypt
import httpx
import pytest

from tests.cli.conftest import demo_banner
from tests.conftest import API_KEY, JWT_SECRET, required_env
from tests.support import base_env, free_port, run_cli, serve_args, wait_for, wait_until

# -- check-config ---------------------------------------------------------------------------


def test_check_config_names_every_missing_variable(tmp_path: Path) -> None:
    result = run_cli("check-config", env=base_env(), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    for name in (
        "UPSTREAM_NET_KEY",
        "UPSTREAM_NET_HOST",
        "JWT_SECRET_KEY",
        "API_USERNAME",
        "API_PASSWORD_HASH",
    ):
        assert name in lines[0]
    assert "Traceback" not in result.stderr


def test_check_config_invalid_values_not_echoed(tmp_path: Path, password_hash: str) -> None:
    env = base_env(**required_env(password_hash))
    env["JWT_SECRET_KEY"] = "short-but-secret-xyz"
    env["API_PASSWORD_HASH"] = "my-plain-password-123"
    env["LOG_LEVEL"] = "chatty"
    env["REDIS_URL"] = "redis-host:6379?password=topsecret99"
    result = run_cli("check-config", env=env, cwd=tmp_path)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    for name in ("JWT_SECRET_KEY", "API_PASSWORD_HASH", "LOG_LEVEL", "REDIS_URL"):
        assert name in result.stderr
    for secret in ("short-but-secret-xyz", "my-plain-password-123", "topsecret99", API_KEY):
        assert secret not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_check_config_ok_and_dotenv(tmp_path: Path, password_hash: str) -> None:
    lines = [f"{k}='{v}'" for k, v in required_env(password_hash).items()]
    (tmp_path / ".env").write_text("\n".join(lines) + "\n")
    result = run_cli("check-config", env=base_env(), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "configuration OK" in result.stdout
    assert JWT_SECRET not in result.stdout
    assert API_KEY not in result.stdout


def test_serve_refuses_a_bad_configuration(tmp_path: Path) -> None:
    result = run_cli("serve", "--port", str(free_port()), env=base_env(), cwd=tmp_path)
    assert result.returncode == 2
    assert "UPSTREAM_NET_KEY" in result.stderr
    assert "Traceback" not in result.stderr


# -- hash-password ----------------------------------------------------------------------------


def test_hash_password_from_stdin(tmp_path: Path) -> None:
    # 12 characters at least (issue 28); the same checks as with the 11 of "s3cret pass".
    result = run_cli("hash-password", env=base_env(), cwd=tmp_path, stdin="s3cret passphrase\n")
    assert result.returncode == 0, result.stderr
    hashed = result.stdout.strip()
    assert hashed.startswith("$2b$")
    assert bcrypt.checkpw(b"s3cret passphrase", hashed.encode())
    assert not bcrypt.checkpw(b"s3cret passphrase\n", hashed.encode())
    assert "s3cret" not in result.stdout + result.stderr


def test_hash_password_refuses_argv(tmp_path: Path) -> None:
    result = run_cli("hash-password", "hunter2-on-argv", env=base_env(), cwd=tmp_path, stdin="")
    assert result.returncode != 0
    assert "$2b$" not in result.stdout
    # Not repeated back either: stderr ends up in CI logs.
    assert "hunter2-on-argv" not in result.stdout + result.stderr
    assert "stdin" in result.stderr


def test_hash_password_refuses_empty(tmp_path: Path) -> None:
    result = run_cli("hash-password", env=base_env(), cwd=tmp_path, stdin="\n")
    assert result.returncode == 1
    assert "$2b$" not in result.stdout


# -- serve -------------------------------------------------------------------------------------


@pytest.mark.parametrize("server", [None, "granian", "uvicorn"])
def test_serve_answers_health_and_stops_on_sigint(
    tmp_path: Path, password_hash: str, spawned: list[subprocess.Popen[str]], server: str | None
) -> None:
    port = free_port()
    env = base_env(**required_env(password_hash))
    if server is not None:  # None: the default, granian
        env["SERVER"] = server
    proc = subprocess.Popen(
        serve_args(port),
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    spawned.append(proc)
    response = wait_for(f"http://127.0.0.1:{port}/health")
    assert response.status_code == 200
    assert response.json()["data"] == {"status": "ok", "service": "isp-gateway"}
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode in (0, 130)  # 130: the conventional exit of an interrupted command
    assert "Traceback" not in err
    for secret in (API_KEY, JWT_SECRET, password_hash):
        assert secret not in out + err
    assert "isp-gateway started" in err  # the lifespan ran
    assert ("granian" in err) == (server != "uvicorn")


# -- demo ----------------------------------------------------------------------------------------


def start_demo(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> tuple[subprocess.Popen[str], list[str]]:
    proc, lines, port = demo_banner(tmp_path, spawned)
    assert any("Ctrl-C" in line for line in lines), lines
    wait_for(f"http://127.0.0.1:{port}/health")
    return proc, lines


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()]


def cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def parse_demo(lines: list[str]) -> dict[str, str]:
    text = "\n".join(lines)
    urls = re.findall(r"https?://[^\s'\"]+", text)
    username = re.search(r"username: (\S+)", text)
    password = re.search(r"password: (\S+)", text)
    document_url = re.search(r"(http://\S+/api/v1/clients/by-document/\S+)", text)
    assert username and password and document_url, text
    return {
        "first_url": urls[0],
        "username": username.group(1),
        "password": password.group(1),
        "document_url": document_url.group(1),
        "text": text,
    }


@pytest.mark.parametrize("interrupt", ["process", "group"])
def test_demo_runs_and_stops_cleanly(
    tmp_path: Path, spawned: list[subprocess.Popen[str]], interrupt: str
) -> None:
    proc, lines = start_demo(tmp_path, spawned)
    demo = parse_demo(lines)
    assert demo["first_url"].endswith("/docs")
    base = demo["first_url"].removesuffix("/docs")
    assert "curl" in demo["text"]
    assert "/api/v1/auth/token" in demo["text"]

    token = httpx.post(
        f"{base}/api/v1/auth/token",
        data={"username": demo["username"], "password": demo["password"]},
        timeout=10,
    )
    assert token.status_code == 200
    bearer = {"Authorization": f"Bearer {token.json()['access_token']}"}
    found = httpx.get(demo["document_url"], headers=bearer, timeout=30)
    assert found.status_code == 200, found.text
    body = found.json()
    assert body["action"] == "client_found"
    assert body["data"]["document"] == demo["document_url"].rsplit("/", 1)[1]
    if interrupt == "process" and shutil.which("curl"):
        # The two printed lines, pasted into a shell as they are.
        pasted = "\n".join(lines[lines.index("Try it:") + 1 :][:2])
        shell = subprocess.run(
            ["bash", "-c", pasted], capture_output=True, text=True, timeout=30, env=base_env()
        )
        assert shell.returncode == 0, shell.stderr
        assert json.loads(shell.stdout)["action"] == "client_found", shell.stdout

    # The simulator, and under granian the server's worker process.
    started = children(proc.pid)
    (simulator_pid,) = [pid for pid in started if b"simulator" in cmdline(pid)]
    if interrupt == "process":
        proc.send_signal(signal.SIGINT)  # `kill -INT <demo>`: the demo stops its simulator
    else:
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal reaches both
    _, err = proc.communicate(timeout=30)
    assert proc.returncode in (0, 130)
    assert "Traceback" not in err, err
    alive = lambda: [pid for pid in started if not gone(pid)]  # noqa: E731
    wait_until(lambda: not alive(), message=lambda: f"the demo's processes {alive()} to end")
    assert gone(simulator_pid)
    assert all(map(gone, started))


def test_demo_on_a_taken_port_stops_before_printing_credentials(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run_cli("demo", "--port", str(port), env=base_env(), cwd=tmp_path)
    assert result.returncode == 1
    assert f"127.0.0.1:{port} is already in use" in result.stderr
    assert "password" not in result.stdout
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("through", ["REDIS_URL", "REDIS_SENTINELS"])
def test_serve_with_unreachable_redis_says_so_in_one_line(
    tmp_path: Path, password_hash: str, through: str
) -> None:
    port = free_port()  # nothing listens there
    redis_env = (
        {"REDIS_URL": f"redis://:redis-pass-123@127.0.0.1:{port}/0"}
        if through == "REDIS_URL"
        else {
            "REDIS_SENTINELS": f"127.0.0.1:{port},127.0.0.1:{free_port()}",
            "REDIS_SENTINEL_MASTER": "mymaster",
            "REDIS_PASSWORD": "redis-pass-123",
            "REDIS_SENTINEL_PASSWORD": "redis-pass-123",
        }
    )
    env = base_env(**required_env(password_hash), **redis_env)
    result = run_cli("serve", "--port", str(free_port()), env=env, cwd=tmp_path)
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert len(result.stderr) < 300, result.stderr
    assert through in result.stderr
    assert "Traceback" not in result.stderr
    assert "redis-pass-123" not in result.stderr


# -- simulator ---------------------------------------------------------------------------------


def test_simulator_with_a_bad_data_file_says_what_is_wrong(tmp_path: Path) -> None:
    data = tmp_path / "data.json"
    data.write_text('{"clients": [{"id_servicio": 1}], "tickets": [{"asunto": "x"}]}', "utf-8")
    env = base_env(SIMULATOR_API_KEY="k")
    for path, named in ((data, "tickets[0]"), (tmp_path / "missing.json", "No such file")):
        result = run_cli(
            "simulator", "--port", str(free_port()), "--data", str(path), env=env, cwd=tmp_path
        )
        assert result.returncode == 2
        assert named in result.stderr
        assert "Traceback" not in result.stderr
