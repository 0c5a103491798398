"""One encoder for every envelope (issue 18.4): the same envelope is the same bytes whichever
layer answers it, the handlers, the middleware or the pre-serialised lists; and one route
table read by the 404 of unknown paths, the 405 guards and the request metrics."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit

from isp_gateway.web.envelope import encode, envelope
from isp_gateway.web.methods import MethodGuard
from tests.conftest import Gateway, Simulator, StartGateway, module_pair_fixtures
from tests.contract.test_contract import _raw_exchange, oversized_chunks
from tests.support import wait_for_fresh_window
from tests.web.conftest import unknown_path_layer

LIMIT = 2048
# The tests only read (a gateway of their own beside it when they need other settings): one
# pair serves them all.
simulator, gateway = module_pair_fixtures()


def test_a_413_is_the_same_bytes_from_the_middleware_and_from_the_handler(
    simulator: Simulator, start_gateway: StartGateway
) -> None:
    gw = start_gateway(simulator.url, MAX_BODY_BYTES=LIMIT)
    # A declared length over the limit: refused by the body-limit middleware.
    head = (
        "POST /api/v1/clients/resolve HTTP/1.1\r\n"
        f"Host: {urlsplit(gw.url).netloc}\r\n"
        f"Authorization: Bearer {gw.token}\r\n"
        "Content-Type: application/json\r\n"
        "Content-Length: 10000000\r\n\r\n"
    ).encode()
    answer = _raw_exchange(gw.url, head)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    from_middleware = answer.partition(b"\r\n\r\n")[2]

    # A chunked upload passing the limit: raised while FastAPI reads it, rendered by the
    # envelope's handler.
    from_handler = gw.post("/api/v1/clients/resolve", content=oversized_chunks())
    assert from_handler.status_code == 413
    assert from_middleware == from_handler.content
    assert from_handler.content == encode(
        envelope(
            ok=False,
            type="error",
            action="payload_too_large",
            message=f"El cuerpo de la solicitud supera {LIMIT} bytes",
        )
    )


def test_the_rate_limiters_429_is_encoded_like_every_envelope(
    simulator: Simulator, start_gateway: StartGateway
) -> None:
    gw = start_gateway(simulator.url, RATE_LIMIT_PER_MINUTE=1)
    wait_for_fresh_window(60)
    gw.get("/api/v1/internet-plans/")
    refused = gw.get("/api/v1/internet-plans/")
    assert refused.status_code == 429
    body = envelope(
        ok=False,
        type="error",
        action="rate_limited",
        message="Demasiadas solicitudes; más despacio",
    )
    assert refused.content == encode(body)
    # The token endpoint's own 429 (outside the envelope) comes from the same encoder.
    token = gw.client.post("/api/v1/auth/token", data={"username": "a", "password": "b"})
    assert token.status_code == 429
    assert token.content == encode({"detail": "Too many requests."})


def test_listed_clients_are_the_bytes_of_the_same_envelope_encoded_whole(gateway: Gateway) -> None:
    for path in ("/api/v1/clients/", "/api/v1/clients/search?q=a", "/api/v1/clients/search?q=zzqx"):
        response = gateway.get(path)
        assert response.status_code == 200, path
        decoded = json.loads(response.content)
        # The clients are the index's packed lines, kept as they are (ASCII, escaped).
        packed = json.dumps(decoded["data"], separators=(",", ":")).encode()
        assert response.content == encode(decoded, data_json=packed), path
        assert list(decoded) == ["ok", "type", "action", "data", "message", "meta"]


def test_one_route_table_holds_every_route_with_the_guards_first(gateway: Gateway) -> None:
    table = gateway.app.state.route_table
    paths = [route.path for route in table.routes]
    # The routes added last (docs, MCP when on) are in it; FastAPI's own too.
    for path in ("/api/v1/clients/by-document/{document}", "/docs", "/openapi.json"):
        assert path in paths, path
    guards = [r for r in table.routes if isinstance(r.original_route, MethodGuard)]
    assert guards and table.routes[: len(guards)] == guards
    # The router tries the same routes in the same order.
    assert [r.original_route for r in table.routes] == list(gateway.app.router.routes)
    # A fixed path shadowed by a parameter answers 405 with the fixed path's methods.
    wrong = gateway.put("/api/v1/clients/resolve", json={})
    assert wrong.status_code == 405
    assert wrong.headers["allow"] == "POST"


def test_a_root_path_is_taken_off_before_unknown_paths_are_judged(gateway: Gateway) -> None:
    """Behind a proxy that keeps its prefix in the path (`root_path`), the 404 layer judges
    the path the router matches: the prefix taken off, as Starlette's router does."""
    layer, passed = unknown_path_layer(gateway)

    async def status(path: str, root_path: str) -> int:
        sent: list[Any] = []

        async def send(message: Any) -> None:
            sent.append(message)

        async def receive() -> Any:
            return {"type": "http.request", "body": b""}

        scope = {
            "type": "http",
            "method": "GET",
            "path": path,
            "root_path": root_path,
            "headers": [],
            "query_string": b"",
        }
        await layer(scope, receive, send)
        return int(sent[0]["status"])

    async def scenario() -> dict[tuple[str, str], int]:
        cases = [
            ("/gw/health", "/gw"),  # the prefix in the path: taken off
            ("/health", "/gw"),  # a proxy that strips it: the path as it is
            ("/gw/nope", "/gw"),
            ("/gwhealth", "/gw"),  # not under the prefix: judged whole
            ("/gw", "/gw"),  # the prefix alone: the empty path, served by no route
        ]
        return {case: await status(*case) for case in cases}

    assert asyncio.run(scenario()) == {
        ("/gw/health", "/gw"): 299,
        ("/health", "/gw"): 299,
        ("/gw/nope", "/gw"): 404,
        ("/gwhealth", "/gw"): 404,
        ("/gw", "/gw"): 404,
    }
    assert passed == ["/gw/health", "/health"]
