"""deploy/nginx.conf as shipped, run by Debian's nginx (as the user running the tests, under a
temporary prefix; only the values the file marks are moved: ports, paths, the monitoring
network) in front of two replicas started with the systemd unit's own command line and
sharing a Redis: HTTPS, the caller's address reaching the login throttle, /metrics and /ready
for the monitoring network only, the body limit, and no lookup lost while a replica stops."""

from __future__ import annotations

import inspect
import re
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import pytest
import uvicorn
from granian.http import HTTP1Settings

from isp_gateway.settings import Settings
from isp_gateway.web.params import MAX_WAIT_SECONDS
from tests.conftest import (
    PASSWORD,
    USERNAME,
    Pair,
    serve_env,
    start_redis_server,
)
from tests.deploy.conftest import DEPLOY, MONITOR, Edge, needs_edge, run_edge
from tests.support import wait_until
from tests.web.test_logs import WRONG_PASSWORD, pick_client

# One stack for the module's tests, on one worker, once pytest-xdist honours the group
# again (pytest-xdist#1386). Split, each worker starts its own stack: the tests hold either way.
pytestmark = pytest.mark.xdist_group("deploy-nginx")

OUTSIDER = "127.0.0.3"  # a caller of its own address, outside the monitoring network
LOGIN = "/api/v1/auth/token"
LIMIT = Settings.model_fields["MAX_BODY_BYTES"].default
REPORT_LIMIT = LIMIT + Settings.model_fields["RECEIPT_MAX_BYTES"].default


@pytest.fixture(scope="module")
def edge(
    module_pair: Pair,
    password_hash: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Edge]:
    simulator, _ = module_pair
    with ExitStack() as stack:
        # A Redis of the stack's own, shared by its two replicas and nothing else, so no
        # other test (nor a second stack) ever meets their throttles and audit.
        store = start_redis_server()
        stack.callback(store.stop)
        env = serve_env(simulator.url, password_hash, REDIS_URL=store.url)
        yield stack.enter_context(run_edge(tmp_path_factory.mktemp("edge"), env))


@pytest.fixture(scope="module")
def document(module_pair: Pair) -> str:
    return pick_client(module_pair[0])[0]


def login(client: httpx.Client, password: str, **headers: str) -> httpx.Response:
    return client.post(LOGIN, data={"username": USERNAME, "password": password}, headers=headers)


@needs_edge
def test_https_through_nginx(edge: Edge) -> None:
    with edge.client() as client:
        answers = [client.get("/health") for _ in range(6)]
    assert [a.status_code for a in answers] == [200] * 6
    assert answers[0].json()["data"] == {"status": "ok", "service": "isp-gateway"}
    assert answers[0].headers["strict-transport-security"].startswith("max-age=")
    assert answers[0].headers["server"] == "nginx"  # no version
    assert answers[0].headers["x-request-id"]  # the gateway's own answer
    # A client without the certificate refuses the connection: it is TLS, for real.
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{edge.url}/health")


@needs_edge
def test_the_login_throttle_sees_each_callers_own_address(edge: Edge) -> None:
    settings = Settings.model_fields
    failures = settings["LOGIN_MAX_FAILURES"].default
    with edge.client(OUTSIDER) as outsider, edge.client(MONITOR) as monitor:
        # The outsider claims to be the monitor: nginx replaces the header with its address.
        spoofed = {"X-Forwarded-For": MONITOR}
        tries = [login(outsider, WRONG_PASSWORD, **spoofed) for _ in range(failures + 1)]
        assert [t.status_code for t in tries] == [401] * failures + [429]
        assert int(tries[-1].headers["Retry-After"]) > 0
        # The outsider's failures lock the outsider only.
        token = login(monitor, PASSWORD)
        assert token.status_code == 200, token.text
        auth = {"Authorization": f"Bearer {token.json()['access_token']}"}
        audit = monitor.get("/api/v1/audit", params={"event": "login", "limit": 50}, headers=auth)
    assert audit.status_code == 200, audit.text
    # The gateway saw each caller's own address, never nginx's.
    seen = Counter((e["outcome"], e["address"]) for e in audit.json()["data"])
    outsiders = {key: n for key, n in seen.items() if key[1] != MONITOR}
    assert outsiders == {("failed", OUTSIDER): failures, ("locked", OUTSIDER): 1}
    assert seen[("ok", MONITOR)] >= 1


@needs_edge
@pytest.mark.parametrize("path", ["/metrics", "/ready"])
def test_operating_endpoints_for_the_monitoring_network_only(edge: Edge, path: str) -> None:
    with edge.client(MONITOR) as monitor, edge.client(OUTSIDER) as outsider:
        allowed = monitor.get(path)
        refused = outsider.get(path)
        # Other spellings of the same path never reach it either.
        name = path.lstrip("/")
        spellings = [f"/{path}", f"/%{ord(name[0]):02x}{name[1:]}", f"{path}?a=1", path.upper()]
        others = {s: outsider.get(f"{edge.url}{s}").status_code for s in spellings}
    assert allowed.status_code == 200, allowed.text
    assert ("isp_gateway_requests_total" in allowed.text) == (path == "/metrics")
    assert refused.status_code == 403
    assert "isp_gateway" not in refused.text
    assert all(status in (403, 404) for status in others.values()), others


@needs_edge
def test_a_body_over_the_limit_gets_the_gateways_own_413(edge: Edge) -> None:
    over = b"x" * (LIMIT + 1)
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    with edge.client() as client:
        refused = client.post(LOGIN, content=over, headers=form)
        chunked = client.post(LOGIN, content=iter([over[:LIMIT], over[LIMIT:]]), headers=form)
        at_limit = client.post(LOGIN, content=over[:LIMIT], headers=form)
    # What a replica answers itself, without nginx.
    direct = httpx.post(edge.replicas[0].url + LOGIN, content=over, headers=form)
    assert direct.status_code == refused.status_code == chunked.status_code == 413
    assert refused.json() == chunked.json() == direct.json()
    assert refused.headers["content-type"] == "application/json"
    # nginx answered those two itself, without a replica.
    assert len(re.findall(r" POST 413 .* upstream=- ", edge.access_log.read_text())) == 2
    # The limit itself is let through: the gateway reads the form (and finds no fields).
    assert at_limit.status_code == 422, at_limit.text


@needs_edge
def test_a_payment_report_may_carry_a_receipt_and_its_limit_is_the_gateways(edge: Edge) -> None:
    # The route's own limit: a receipt (RECEIPT_MAX_BYTES) and the form around it.
    path = "/api/v1/clients/101/payment-reports"
    limit = REPORT_LIMIT
    form = {"Content-Type": "multipart/form-data; boundary=x"}
    photo = b"x" * (2 * 1024 * 1024)  # a phone's photo of a receipt
    with edge.client() as client:
        token = login(client, PASSWORD).json()["access_token"]
        auth = {**form, "Authorization": f"Bearer {token}"}
        taken = client.post(path, content=photo, headers=auth)
        refused = client.post(path, content=b"x" * (limit + 1), headers=auth)
    # The photo reached a replica (nginx's 413 said the body was larger than 64 KiB): no
    # verification id, the gateway's 403.
    assert taken.status_code == 403, taken.text
    assert taken.json()["action"] == "verification_required"
    direct = httpx.post(edge.replicas[0].url + path, content=b"x" * (limit + 1), headers=auth)
    assert direct.status_code == refused.status_code == 413
    assert refused.json() == direct.json()
    assert refused.headers["content-type"] == "application/json"


@needs_edge
def test_no_lookup_is_lost_while_a_replica_stops(edge: Edge, document: str) -> None:
    with edge.client() as client:
        token = login(client, PASSWORD).json()["access_token"]
    auth = {"Authorization": f"Bearer {token}"}
    path = f"/api/v1/clients/by-document/{document}"
    # (status or exception, whether the replica had stopped when it was sent)
    answers: list[tuple[int | str, bool]] = []
    stopped = threading.Event()
    done = threading.Event()

    def loop() -> None:
        with edge.client() as client:
            while not done.is_set():
                after = stopped.is_set()
                try:
                    answers.append((client.get(path, headers=auth).status_code, after))
                except httpx.HTTPError as exc:
                    answers.append((type(exc).__name__, after))

    gone = edge.replicas[1]
    start = edge.access_log.stat().st_size
    threads = [threading.Thread(target=loop) for _ in range(4)]
    for thread in threads:
        thread.start()
    try:
        # Round robin: both replicas answer lookups before one of them stops.
        replicas = {replica.url.removeprefix("http://") for replica in edge.replicas}
        wait_until(lambda: replicas <= set(edge.upstreams(start)), timeout=20)
        # The unit's KillSignal: answer what is in flight, then stop.
        gone.proc.send_signal(signal.SIGTERM)
        assert gone.proc.wait(timeout=30) == 0, gone.log.read_text()
        stopped.set()
        wait_until(lambda: sum(after for _, after in answers) >= 100, timeout=20)
    finally:
        done.set()
        for thread in threads:
            thread.join(timeout=30)
    assert Counter(status for status, _ in answers) == {200: len(answers)}
    # Requests sent to the stopped replica went on to the other one (nginx logs both).
    assert any(", " in u for u in edge.upstreams(start))
    # nginx's logs name no document (lookup paths hold them); the access log has the
    # gateway's request ids to join its lines to the gateway's.
    logged = edge.access_log.read_text()
    assert document not in logged + edge.error_log.read_text()
    assert re.search(r"id=\S{8,}", logged)


def directive(name: str) -> str:
    (value,) = re.findall(rf"^\s*{name}\s+([^;]+);", (DEPLOY / "nginx.conf").read_text(), re.M)
    return str(value)


def test_the_proxys_limits_are_the_gateways() -> None:
    assert re.findall(r"client_max_body_size\s+([^;]+);", (DEPLOY / "nginx.conf").read_text()) == [
        f"{LIMIT // 1024}k",
        f"{REPORT_LIMIT // 1024}k",
    ]
    # The longest answer: a long poll plus one upstream call plus the deadline's 2 s.
    timeout = Settings.model_fields["UPSTREAM_TIMEOUT_SECONDS"].default
    longest = MAX_WAIT_SECONDS + timeout + 2
    assert longest < float(directive("proxy_read_timeout").removesuffix("s")) <= longest + 10
    # nginx drops an idle connection to a replica before the replica would: uvicorn after
    # its default timeout_keep_alive (`serve` keeps it), granian after its header timeout.
    idle = min(
        inspect.signature(uvicorn.Config).parameters["timeout_keep_alive"].default,
        HTTP1Settings().header_read_timeout / 1000,
    )
    assert float(directive("keepalive_timeout").removesuffix("s")) < idle
    # A POST that reached a replica is never resent (docs/deployment.md, "nginx": why).
    assert "non_idempotent" not in directive("proxy_next_upstream")
