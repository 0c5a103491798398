"""Both servers SERVER can name (granian, the default, and uvicorn), each running the real
app with the probe routes in its own process as `serve` runs it: request bodies,
`X-Request-ID`, CORS, the 500 envelope, proxy headers, the lifespan and a graceful stop."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from isp_gateway.auth.tokens import issue_token
from isp_gateway.settings import load_settings
from tests.conftest import PASSWORD, USERNAME, required_env
from tests.support import base_env, error_body, free_port, wait_for, wait_until

ROOT = Path(__file__).resolve().parents[2]
SERVERS = ["granian", "uvicorn"]
# On one xdist worker: the module's `served` servers start once each, not once a worker
# (ten starts of `serve`, about a tenth of the suite's setup time, spread over six workers).
pytestmark = pytest.mark.xdist_group("cli-servers")
ORIGIN = "http://localhost:3000"


@dataclass
class Served:
    url: str
    proc: subprocess.Popen[str]
    auth: dict[str, str]

    def stop(self) -> str:
        """SIGINT, as a terminal's Ctrl-C or a supervisor does; returns everything logged."""
        if self.proc.poll() is None:
            # Not SIGKILL: granian's worker would outlive its parent and hold the pipe.
            self.proc.send_signal(signal.SIGINT)
        out, _ = self.proc.communicate(timeout=30)
        return out


def start_served(password_hash: str, server: str, **env: str) -> Served:
    port = free_port()
    environment = base_env(**required_env(password_hash), SERVER=server, **env)
    environment["PYTHONPATH"] = str(ROOT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.cli.served_probe", str(port)],
        env=environment,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(f"{url}/health", deadline=60)
    except AssertionError:
        proc.kill()
        raise AssertionError(proc.communicate(timeout=10)[0]) from None
    settings = load_settings(**required_env(password_hash))
    token = issue_token(settings, USERNAME)
    return Served(url, proc, {"Authorization": f"Bearer {token}"})


@pytest.fixture(scope="module", params=SERVERS)
def served(request: pytest.FixtureRequest, password_hash: str) -> Iterator[Served]:
    handle = start_served(password_hash, request.param)
    yield handle
    handle.stop()


def test_request_bodies(served: Served) -> None:
    form = {"username": USERNAME, "password": PASSWORD}
    token = httpx.post(f"{served.url}/api/v1/auth/token", data=form, timeout=10)
    assert token.status_code == 200, token.text
    assert token.json()["access_token"]
    body = {"pings": 3, "name": "x" * 5000}  # larger than one read
    echoed = httpx.post(f"{served.url}/api/v1/_probe/body", json=body, headers=served.auth)
    assert echoed.status_code == 200
    assert echoed.json() == body
    broken = httpx.post(
        f"{served.url}/api/v1/_probe/body",
        content=b'{"pings": 3,',
        headers={**served.auth, "Content-Type": "application/json"},
    )
    assert broken.status_code == 422
    assert broken.json()["action"] == "validation_error"


def test_a_malformed_body_keeps_the_connection(served: Served) -> None:
    """The edge answers a malformed body once its stated length is here, before granian's
    last message of it: the connection stays open, and the next request on it is answered
    (a server that closed it would make every bot reconnect after a 422)."""
    host, port = served.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    headers = {**served.auth, "Content-Type": "application/json"}
    sound = b'{"pings": 3, "name": "x"}'
    try:
        conn.request("POST", "/api/v1/clients/resolve", body=b'{"document": "1', headers=headers)
        first = conn.getresponse()
        assert first.status == 422
        assert json.loads(first.read())["action"] == "validation_error"
        sock = conn.sock
        assert sock is not None
        conn.request("POST", "/api/v1/_probe/body", body=sound, headers=headers)
        second = conn.getresponse()
        assert json.loads(second.read()) == json.loads(sound)
        assert conn.sock is sock  # the same connection, not a new one
    finally:
        conn.close()


def test_request_id_kept_or_given(served: Served) -> None:
    kept = httpx.get(f"{served.url}/health", headers={"X-Request-ID": "bot-42"})
    assert kept.headers["x-request-id"] == "bot-42"
    given = [httpx.get(f"{served.url}/health").headers["x-request-id"] for _ in range(2)]
    assert given[0] and given[0] != given[1]


def test_cors(served: Served) -> None:
    preflight = httpx.options(
        f"{served.url}/api/v1/_probe/whoami",
        headers={
            "Origin": ORIGIN,
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "Authorization",
        },
    )
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == ORIGIN
    simple = httpx.get(
        f"{served.url}/api/v1/_probe/whoami", headers={**served.auth, "Origin": ORIGIN}
    )
    assert simple.json() == {"sub": USERNAME}
    assert simple.headers["access-control-allow-origin"] == ORIGIN
    assert "x-request-id" in simple.headers["access-control-expose-headers"].lower()


def test_unhandled_error_is_the_500_envelope(served: Served) -> None:
    response = httpx.get(
        f"{served.url}/api/v1/_probe/crash",
        headers={**served.auth, "Origin": ORIGIN, "X-Request-ID": "crash-1"},
    )
    assert response.status_code == 500
    assert response.json() == error_body("error", "Error interno del servidor")
    assert response.headers["x-request-id"] == "crash-1"
    assert response.headers["access-control-allow-origin"] == ORIGIN


def test_proxy_headers_from_a_trusted_address(served: Served) -> None:
    forwarded = {"X-Forwarded-For": "203.0.113.7"}
    response = httpx.get(f"{served.url}/_probe/client", headers=forwarded)
    assert response.json() == {"host": "203.0.113.7"}


@pytest.mark.parametrize("server", SERVERS)
def test_proxy_headers_from_an_untrusted_address_are_ignored(
    password_hash: str, server: str
) -> None:
    handle = start_served(password_hash, server, FORWARDED_ALLOW_IPS="10.9.8.7")
    try:
        response = httpx.get(
            f"{handle.url}/_probe/client", headers={"X-Forwarded-For": "203.0.113.7"}
        )
        assert response.json() == {"host": "127.0.0.1"}
    finally:
        handle.stop()


@pytest.mark.parametrize("server", SERVERS)
def test_lifespan_and_graceful_stop(password_hash: str, server: str) -> None:
    handle = start_served(password_hash, server)
    answers: list[httpx.Response] = []
    slow = threading.Thread(
        target=lambda: answers.append(httpx.get(f"{handle.url}/_probe/slow", timeout=30))
    )
    slow.start()
    wait_until(  # the slow request is in flight
        lambda: httpx.get(f"{handle.url}/_probe/slow/started").json()["started"] == 1
    )
    output = handle.stop()
    slow.join(timeout=30)
    assert handle.proc.returncode in (0, 130)
    # The request in flight was answered before the process stopped.
    assert [a.status_code for a in answers] == [200], output
    assert "isp-gateway started" in output  # the lifespan ran at start-up...
    # ...and at shutdown: the access log's last batch is written there.
    assert "GET /_probe/slow 200" in output, output
    assert "Traceback" not in output


def test_json_error_line_carries_the_request_id(password_hash: str) -> None:
    handle = start_served(password_hash, "granian", LOG_FORMAT="json")
    try:
        response = httpx.get(
            f"{handle.url}/api/v1/_probe/crash",
            headers={**handle.auth, "X-Request-ID": "crash-json-1"},
        )
        assert response.status_code == 500
    finally:
        output = handle.stop()
    lines = [json.loads(line) for line in output.splitlines()]
    (error,) = [line for line in lines if line["level"] == "ERROR"]
    assert error["logger"] == "isp_gateway"
    assert error["request_id"] == "crash-json-1"
    assert "RuntimeError: boom" in error["exception"]  # the traceback stays in the log
    access = [line for line in lines if line["logger"] == "isp_gateway.access"]
    assert any(line["request_id"] == "crash-json-1" and line["status"] == 500 for line in access)
