"""Issue 28, point 22: deploy/nginx.conf answers its own errors (403 for the monitoring
paths, 502 when no replica answers, 504 when one is too slow) in the gateway's envelope with
`Content-Type: application/json`, as its 413 did: never nginx's HTML page. A replica's own
502 (the ISP backend failing) passes through as the replica said it."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.deploy.conftest import MONITOR, run_nginx
from tests.support import error_body, free_port, run_server

OUTSIDER = "127.0.0.3"
HTML = "<html"


def client(url: str, tls: ssl.SSLContext, source: str = MONITOR) -> httpx.Client:
    transport = httpx.HTTPTransport(verify=tls, local_address=source)
    return httpx.Client(base_url=url, transport=transport, timeout=30)


def assert_json(response: httpx.Response, status: int, action: str, message: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert HTML not in response.text
    assert response.json() == error_body(action, message)
    assert response.headers["strict-transport-security"].startswith("max-age=")


@contextmanager
def silent_replicas(count: int) -> Iterator[list[int]]:
    """Ports whose listener takes connections (the kernel's backlog) and never answers."""
    with ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket())
            sock.bind(("127.0.0.1", free_port()))
            sock.listen(64)
            ports.append(sock.getsockname()[1])
        yield ports


def test_no_replica_answering_is_a_502_in_the_envelope(tmp_path: Path) -> None:
    # Both replicas down: nobody listens on either port.
    with ExitStack() as stack:
        url, tls = stack.enter_context(run_nginx(tmp_path, [free_port(), free_port()], ready=False))
        api = stack.enter_context(client(url, tls))
        down = [api.get("/api/v1/clients/by-document/12345678"), api.get("/health")]
        posted = api.post("/api/v1/auth/token", data={"username": "a", "password": "b"})
    for response in [*down, posted]:
        assert_json(
            response,
            502,
            "service_unavailable",
            "No replica of the service answered, try again shortly",
        )
        assert response.headers["retry-after"] == "5"


def test_the_monitoring_paths_are_refused_in_the_envelope(tmp_path: Path) -> None:
    with ExitStack() as stack:
        url, tls = stack.enter_context(run_nginx(tmp_path, [free_port(), free_port()], ready=False))
        outsider = stack.enter_context(client(url, tls, OUTSIDER))
        refused = [outsider.get("/metrics"), outsider.get("/ready")]
    for response in refused:
        assert_json(response, 403, "forbidden", "Forbidden")
        assert "isp_gateway" not in response.text


def test_a_replica_too_slow_is_a_504_in_the_envelope(tmp_path: Path) -> None:
    # proxy_read_timeout as shipped is 40 s (a long poll); 1 s here, the rest as shipped.
    faster = {"proxy_read_timeout 40s;": "proxy_read_timeout 1s;"}
    with silent_replicas(2) as ports, run_nginx(tmp_path, ports, faster, ready=False) as edge:
        url, tls = edge
        with client(url, tls) as api:
            slow = api.get("/api/v1/clients/by-document/12345678")
    assert_json(
        slow, 504, "service_timeout", "The service did not answer in time, try again shortly"
    )
    assert slow.headers["retry-after"] == "5"


@pytest.mark.parametrize("status", [502, 503, 504])
def test_a_replicas_own_error_passes_as_it_is(tmp_path: Path, status: int) -> None:
    """The gateway's 502 (the ISP backend), 503 (its Redis) or 504 are its own answers, with
    its own action: nginx's pages are for nginx's errors only."""
    body = error_body("upstream_unavailable", "The ISP backend is not available right now")

    async def failing(request: Request) -> JSONResponse:
        return JSONResponse(body, status_code=status, headers={"X-Request-ID": "own-1"})

    app = Starlette(routes=[Route("/{path:path}", failing)])
    with ExitStack() as stack:
        ports = [
            int(stack.enter_context(run_server(app)).rsplit(":", 1)[1]),
            free_port(),  # the other replica is down
        ]
        url, tls = stack.enter_context(run_nginx(tmp_path, ports, ready=False))
        with client(url, tls) as api:
            answers = [api.get("/api/v1/clients/") for _ in range(4)]
    for answer in answers:
        assert answer.status_code == status
        assert answer.json() == body
        assert answer.headers["x-request-id"] == "own-1"


def test_a_payment_report_meets_nginxs_502_and_504_in_the_envelope(tmp_path: Path) -> None:
    """The receipts' location names its own 413, and an error_page in a location drops every
    one of the server's: a report sent while no replica answered got nginx's HTML 502, with no
    Retry-After, and one a replica was too slow for its HTML 504."""
    report = "/api/v1/clients/5/payment-reports"
    (tmp_path / "down").mkdir()
    (tmp_path / "slow").mkdir()
    with ExitStack() as stack:
        url, tls = stack.enter_context(
            run_nginx(tmp_path / "down", [free_port(), free_port()], ready=False)
        )
        down = stack.enter_context(client(url, tls)).post(report, json={})
    assert_json(
        down, 502, "service_unavailable", "No replica of the service answered, try again shortly"
    )
    assert down.headers["retry-after"] == "5"
    faster = {"proxy_read_timeout 40s;": "proxy_read_timeout 1s;"}
    with silent_replicas(2) as ports, ExitStack() as stack:
        url, tls = stack.enter_context(run_nginx(tmp_path / "slow", ports, faster, ready=False))
        slow = stack.enter_context(client(url, tls)).post(report, json={})
    assert_json(
        slow, 504, "service_timeout", "The service did not answer in time, try again shortly"
    )
    assert slow.headers["retry-after"] == "5"


def test_a_request_nginx_cannot_read_is_refused_in_the_envelope(tmp_path: Path) -> None:
    """A request line or headers over nginx's 8k (the replicas take both: a long search, a
    large cookie) and plain HTTP sent to the HTTPS port got nginx's HTML 414 and 400."""
    unread = (
        "The request could not be read (malformed, headers over 8 KiB, or plain HTTP to the "
        "HTTPS port)"
    )
    with ExitStack() as stack:
        url, tls = stack.enter_context(run_nginx(tmp_path, [free_port(), free_port()], ready=False))
        api = stack.enter_context(client(url, tls))
        long_line = [
            api.get("/api/v1/clients/search", params={"q": "A" * 9000}),
            api.post("/api/v1/clients/5/payment-reports", params={"q": "A" * 9000}),
        ]
        large_header = api.get("/health", headers={"X-Large": "A" * 9000})
        plain = stack.enter_context(
            httpx.Client(transport=httpx.HTTPTransport(local_address=MONITOR), timeout=30)
        ).get(url.replace("https://", "http://") + "/health")
    for response in long_line:
        assert response.status_code == 414, response.text
        assert response.headers["content-type"] == "application/json"
        assert response.json() == error_body("uri_too_long", "The request line is over 8 KiB")
    assert_json(large_header, 400, "bad_request", unread)
    assert plain.status_code == 400 and plain.headers["content-type"] == "application/json"
    assert plain.json() == error_body("bad_request", unread)
