"""The upstream gateway core against the simulator (and a scripted upstream for shapes the
simulator never produces): pagination, headers, error mapping, timeouts and retries."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

from isp_gateway.kit.errors import (
    UpstreamRateLimited,
    UpstreamRejected,
    UpstreamUnauthorized,
    UpstreamUnavailable,
)
from isp_gateway.store import MemoryStore
from isp_gateway.upstream.gateway import UpstreamGateway
from tests.conftest import API_KEY, Simulator, StartSimulator
from tests.support import run_server, wait_until_async
from tests.upstream.conftest import Connect, ScriptedUpstream

pytestmark = pytest.mark.anyio

Factory = Callable[..., Any]


@pytest.fixture
def make_gateway(connect: Connect) -> Factory:
    """Build the real UpstreamGateway (pooled client + budget) against a URL."""

    def make(url: str, **overrides: Any) -> UpstreamGateway:
        upstream = connect(url, **overrides)
        upstream.gateway.budget_store = upstream.store  # type: ignore[attr-defined]
        return upstream.gateway

    return make


async def attempts(gateway: UpstreamGateway) -> int:
    """Calls spent from the rate budget: one per attempt, made or not."""
    store: MemoryStore = gateway.budget_store  # type: ignore[attr-defined]
    window = int(time.time() // 360)  # the hour is counted in ten buckets
    return int(await store.get(f"budget:3600:{window}") or 0)


async def scripted_pages(
    make_gateway: Factory, upstream: ScriptedUpstream, path: str, **overrides: Any
) -> list[Any]:
    """All pages of `path`, read by a gateway from the scripted upstream (served meanwhile)."""
    with run_server(upstream.app()) as url:
        rows: list[Any] = await make_gateway(url, **overrides).get_all_pages(path)
    return rows


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed again: connections are refused


# -- pagination -----------------------------------------------------------------------------


async def test_all_pages_with_a_capped_page_size(
    start_simulator: StartSimulator, make_gateway: Factory
) -> None:
    sim = start_simulator(clients=200, max_page_size=30)
    gateway = make_gateway(sim.url, UPSTREAM_PAGE_SIZE=50, UPSTREAM_PARALLEL_PAGES=3)
    rows = await gateway.get_all_pages("api/clientes/")
    ids = [r["id_servicio"] for r in rows]
    assert len(ids) == 200
    assert len(set(ids)) == 200
    # 200 rows at the capped 30 a page: exactly 7 requests, none wasted.
    assert sim.state.calls["GET /api/clientes/"] == 7


async def test_all_pages_in_one_call_when_it_fits(
    start_simulator: StartSimulator, make_gateway: Factory
) -> None:
    sim = start_simulator(clients=120)
    gateway = make_gateway(sim.url, UPSTREAM_PAGE_SIZE=500)
    rows = await gateway.get_all_pages("api/clientes/")
    assert len(rows) == 120
    assert sim.state.calls["GET /api/clientes/"] == 1


async def test_filters_are_passed_on(simulator: Simulator, make_gateway: Factory) -> None:
    gateway = make_gateway(simulator.url)
    first = (await gateway.get_json("api/clientes/", {"limit": 1}))["results"][0]
    rows = await gateway.get_all_pages("api/clientes/", {"cedula": first["cedula"]})
    assert [r["id_servicio"] for r in rows] == [first["id_servicio"]]


async def test_count_missing_and_next_never_followed(make_gateway: Factory) -> None:
    upstream = ScriptedUpstream(95, with_count=False, cap=20)
    rows = await scripted_pages(make_gateway, upstream, "api/rows/", UPSTREAM_PAGE_SIZE=50)
    assert [r["id"] for r in rows] == list(range(95))
    # Sequential paging from limit/offset: 5 pages of 20; `next` (another host, https)
    # would have failed if it had been followed.
    assert upstream.hits["/api/rows/"] == 5


async def test_next_with_wrong_scheme_is_ignored(make_gateway: Factory) -> None:
    upstream = ScriptedUpstream(250, cap=100)
    rows = await scripted_pages(make_gateway, upstream, "api/rows/", UPSTREAM_PAGE_SIZE=100)
    assert [r["id"] for r in rows] == list(range(250))
    assert upstream.hits["/api/rows/"] == 3


async def test_unpaginated_list_answer(make_gateway: Factory) -> None:
    upstream = ScriptedUpstream(7)
    rows = await scripted_pages(make_gateway, upstream, "api/flat/")
    assert len(rows) == 7
    assert upstream.hits["/api/flat/"] == 1


async def test_empty_list(simulator: Simulator, make_gateway: Factory) -> None:
    gateway = make_gateway(simulator.url)
    assert await gateway.get_all_pages("api/clientes/", {"cedula": "no-such-doc"}) == []


@pytest.mark.parametrize(
    ("faults", "size"),
    [
        ({}, 500),  # the first page itself ends early (half its rows, next: null)
        ({"min_offset": 60}, 30),  # a later page ends early
        ({"min_offset": 90}, 30),  # a page of one row comes back empty
    ],
)
async def test_a_short_read_is_a_failed_read(
    start_simulator: StartSimulator,
    make_gateway: Factory,
    faults: dict[str, Any],
    size: int,
) -> None:
    sim = start_simulator(clients=91, max_page_size=30)
    sim.state.faults.update(
        {"short_page": True, "scopes": {"short_page": {"path_prefix": "/api/clientes/", **faults}}}
    )
    gateway = make_gateway(sim.url, UPSTREAM_PAGE_SIZE=size)
    with pytest.raises(UpstreamUnavailable):
        await gateway.get_all_pages("api/clientes/")
    with pytest.raises(UpstreamUnavailable):
        await gateway.get_all_pages_as("api/clientes/", len)


# -- request shape ----------------------------------------------------------------------------


async def test_auth_header_and_trailing_slash(simulator: Simulator, make_gateway: Factory) -> None:
    gateway = make_gateway(simulator.url)
    response = await gateway.request("GET", "api/plan-internet", params={"limit": 5})
    assert response.status_code == 200
    assert response.request.headers["authorization"] == f"Api-Key {API_KEY}"
    assert response.request.url.path == "/api/plan-internet/"
    assert simulator.state.calls["GET /api/plan-internet/"] == 1
    # No redirect was ever needed (the simulator counts the slash-less path separately).
    assert "GET /api/plan-internet" not in simulator.state.calls


async def test_key_sent_on_every_request(make_gateway: Factory) -> None:
    upstream = ScriptedUpstream(30, cap=10)
    await scripted_pages(make_gateway, upstream, "api/rows/")
    assert len(upstream.headers) == 3
    assert {h["authorization"] for h in upstream.headers} == {f"Api-Key {API_KEY}"}


async def test_host_with_a_path_prefix(make_gateway: Factory, simulator: Simulator) -> None:
    # A base path on the host is kept (httpx joins relative paths under it).
    gateway = make_gateway(simulator.url + "/")
    assert gateway.http.base_url.path == "/"
    body = await gateway.get_json("api/plan-internet/")
    assert body["count"] > 0


# -- error mapping ----------------------------------------------------------------------------


async def test_403_is_unauthorized(simulator: Simulator, make_gateway: Factory) -> None:
    gateway = make_gateway(simulator.url, UPSTREAM_NET_KEY="a-wrong-key-0000")
    with pytest.raises(UpstreamUnauthorized) as caught:
        await gateway.get_json("api/clientes/")
    assert caught.value.status_code == 502
    assert caught.value.action == "upstream_unauthorized"
    simulator.state.faults.update({"force_403": True})
    with pytest.raises(UpstreamUnauthorized):
        await make_gateway(simulator.url).get_json("api/clientes/")


async def test_429_is_rate_limited_with_retry_after(
    simulator: Simulator, make_gateway: Factory
) -> None:
    simulator.state.faults.update({"force_429": True, "retry_after": 17})
    with pytest.raises(UpstreamRateLimited) as caught:
        await make_gateway(simulator.url).get_json("api/clientes/")
    assert caught.value.retry_after == 17
    assert caught.value.status_code == 503
    assert caught.value.headers == {"Retry-After": "17"}


async def test_500_and_html_are_unavailable(simulator: Simulator, make_gateway: Factory) -> None:
    simulator.state.faults.update({"error_rate": 1.0})
    gateway = make_gateway(simulator.url)
    for _ in range(6):  # both the HTML page and the JSON 500 occur
        with pytest.raises(UpstreamUnavailable) as caught:
            await gateway.get_json("api/clientes/")
        assert caught.value.status_code == 502
        assert caught.value.action == "upstream_unavailable"
    assert simulator.state.calls["GET /api/clientes/"] == 6  # 5xx is not retried


async def test_garbage_json_is_unavailable(simulator: Simulator, make_gateway: Factory) -> None:
    simulator.state.faults.update({"garbage": 1.0})
    gateway = make_gateway(simulator.url)
    for _ in range(8):
        with pytest.raises(UpstreamUnavailable):
            await gateway.get_json("api/clientes/")
    with pytest.raises(UpstreamUnavailable):
        await gateway.get_all_pages("api/clientes/")


async def test_unexpected_page_shape_is_unavailable(
    simulator: Simulator, make_gateway: Factory
) -> None:
    gateway = make_gateway(simulator.url)
    # A task answer is JSON but not a page.
    task_id = (await gateway.request("POST", "api/clientes/101/ping/", json={"pings": 1})).json()
    with pytest.raises(UpstreamUnavailable):
        await gateway.get_all_pages(f"api/tasks/{task_id['task_id']}/")


async def test_4xx_is_rejected_with_status_and_body(
    simulator: Simulator, make_gateway: Factory
) -> None:
    gateway = make_gateway(simulator.url)
    with pytest.raises(UpstreamRejected) as caught:
        await gateway.request("POST", "api/clientes/101/ping/", json={})
    assert caught.value.upstream_status == 400
    assert caught.value.body == {"pings": ["Este campo es requerido."]}
    with pytest.raises(UpstreamRejected) as missing:
        await gateway.get_json("api/tickets/99999999/")
    assert missing.value.upstream_status == 404


async def test_404_page_that_is_not_json_is_unavailable_not_missing(
    make_gateway: Factory,
) -> None:
    # A host that is not a WispHub API (or a proxy in front of it) answers its own HTML 404:
    # that must read as "upstream unusable", never as "this ticket/client does not exist".
    with run_server(ScriptedUpstream(1).app()) as url:
        gateway = make_gateway(url)
        with pytest.raises(UpstreamUnavailable) as caught:
            await gateway.get_json("api/tickets/5/")
        assert caught.value.status_code == 502


async def test_hang_times_out_and_is_not_retried(
    simulator: Simulator, make_gateway: Factory
) -> None:
    simulator.state.faults.update({"hang_rate": 1.0})
    gateway = make_gateway(simulator.url, UPSTREAM_TIMEOUT_SECONDS=0.5)
    started = time.monotonic()
    with pytest.raises(UpstreamUnavailable):
        await gateway.get_json("api/clientes/")
    elapsed = time.monotonic() - started
    # Timed out (the hang lasts an hour), with room for a stalled test process: the count
    # of calls below, not the time, is what shows it was not retried.
    assert 0.4 <= elapsed < 5
    assert simulator.state.calls["GET /api/clientes/"] == 1
    with pytest.raises(UpstreamUnavailable):
        await gateway.request("POST", "api/clientes/101/ping/", json={"pings": 1})
    assert simulator.state.calls["POST /api/clientes/{id}/ping/"] == 1


async def test_refused_connection_retried_once_for_reads_only(make_gateway: Factory) -> None:
    gateway = make_gateway(f"http://127.0.0.1:{closed_port()}")
    with pytest.raises(UpstreamUnavailable):
        await gateway.get_json("api/clientes/")
    assert await attempts(gateway) == 2
    with pytest.raises(UpstreamUnavailable):
        await gateway.request("POST", "api/tickets/", json={"asunto": "x"})
    assert await attempts(gateway) == 3  # a write is never repeated
    with pytest.raises(UpstreamUnavailable):
        await gateway.request("PATCH", "api/clientes/1/perfil/", json={"telefono": "1"})
    assert await attempts(gateway) == 4


async def test_redirect_not_followed(make_gateway: Factory) -> None:
    upstream = ScriptedUpstream(0)
    with run_server(upstream.app()) as url:
        gateway = make_gateway(url)
        with pytest.raises(UpstreamUnavailable):
            await gateway.request("POST", "api/moved/", json={"asunto": "x"})
        with pytest.raises(UpstreamUnavailable):
            await gateway.get_json("api/moved/")
    assert upstream.hits["/api/moved/"] == 2
    assert upstream.hits["/api/target/"] == 0


async def test_key_never_logged(
    simulator: Simulator, make_gateway: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG")
    simulator.state.faults.update({"force_403": True})
    gateway = make_gateway(simulator.url)
    with contextlib.suppress(UpstreamUnauthorized):
        await gateway.get_json("api/clientes/", {"cedula": "12345"})
    assert any("rejected" in r.getMessage() for r in caplog.records)
    assert all(API_KEY not in r.getMessage() for r in caplog.records)


async def test_a_background_read_pauses_on_429_and_resumes_where_it_was(
    start_simulator: StartSimulator, make_gateway: Factory
) -> None:
    sim = start_simulator(clients=200, max_page_size=30)
    gateway = make_gateway(sim.url, UPSTREAM_PAGE_SIZE=30, UPSTREAM_PARALLEL_PAGES=1)
    first = await gateway.get_page("api/clientes/", {}, 30, 0)
    assert first[0] == 200
    sim.state.reset_stats()
    # The upstream throttles for a while: the pages asked meanwhile are asked again after
    # Retry-After, and the read completes without starting over.
    sim.state.faults.update({"force_429": True, "retry_after": 1})
    task = asyncio.ensure_future(gateway.get_all_pages("api/clientes/", background=True))
    # Until the read has met the throttle (its first page answered 429).
    await wait_until_async(lambda: sim.state.calls["GET /api/clientes/"] >= 1)
    sim.state.faults.update({"force_429": False})
    rows = await asyncio.wait_for(task, timeout=30)
    assert sorted(r["id_servicio"] for r in rows) == sorted(set(r["id_servicio"] for r in rows))
    assert len(rows) == 200
    # Seven pages, and only the throttled attempt repeated: no second pass from page one.
    assert sim.state.calls["GET /api/clientes/"] <= 7 + 2


async def test_a_background_page_that_keeps_failing_is_asked_four_times_with_growing_waits(
    simulator: Simulator, make_gateway: Factory
) -> None:
    simulator.state.faults.update({"error_rate": 1.0})
    gateway = make_gateway(simulator.url, UPSTREAM_PAGE_RETRY_SECONDS=0.2)
    started = time.monotonic()
    with pytest.raises(UpstreamUnavailable):
        await gateway.get_page("api/clientes/", {}, 50, 0, background=True)
    # Four attempts, 0.2, 0.4 and 0.8 s apart (UPSTREAM_PAGE_RETRY_SECONDS, doubled); the
    # default's 2, 4 and 8 s would take 14 s.
    assert simulator.state.calls["GET /api/clientes/"] == 4
    assert 1.4 <= time.monotonic() - started < 10


async def test_an_interactive_read_is_not_retried_on_429(
    simulator: Simulator, make_gateway: Factory
) -> None:
    simulator.state.faults.update({"force_429": True, "retry_after": 1})
    with pytest.raises(UpstreamRateLimited):
        await make_gateway(simulator.url).get_all_pages("api/clientes/")


@contextlib.asynccontextmanager
async def dropping_upstream() -> Any:
    """A loopback upstream that answers the first request of each connection, keeps it
    alive, and closes it without a word on the next one: the race of a pooled connection
    the upstream had just timed out. Yields its URL and the requests it took."""
    seen: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            for answered in range(2):
                head = await reader.readuntil(b"\r\n\r\n")
                seen.append(head.split(b"\r\n", 1)[0])
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                await reader.readexactly(length)
                if answered:
                    break  # the second request on the connection: dropped unanswered
                body = b'{"count": 0, "next": null, "results": []}'
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\nconnection: keep-alive\r\n\r\n%s" % (len(body), body)
                )
                await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}", seen


async def test_a_dropped_keep_alive_connection_is_asked_again_for_reads_only(
    make_gateway: Factory,
) -> None:
    """A read on a pooled connection the upstream drops is asked once more on a new one
    (not a 502); a write that may have reached it is never repeated."""
    async with dropping_upstream() as (url, seen):
        gateway = make_gateway(url)
        assert (await gateway.get_json("api/clientes/"))["count"] == 0
        assert (await gateway.get_json("api/clientes/"))["count"] == 0  # dropped, asked again
        assert len(seen) == 3 and await attempts(gateway) == 3
        with pytest.raises(UpstreamUnavailable):
            await gateway.request("POST", "api/tickets/", json={"asunto": "x"})
        assert len(seen) == 4 and await attempts(gateway) == 4  # never repeated
