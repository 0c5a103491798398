"""Fixtures for the upstream tests: the real UpstreamGateway against a URL, a scripted
upstream for shapes the simulator never produces, a backend that records the writes it is
sent, and gateway settings against it."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from isp_gateway.settings import Settings
from isp_gateway.store import MemoryStore
from isp_gateway.upstream.budget import RateBudget
from isp_gateway.upstream.gateway import UpstreamGateway, build_http_client
from tests.conftest import gateway_settings
from tests.support import run_server


@dataclass
class Upstream:
    gateway: UpstreamGateway
    store: MemoryStore

    async def spent(self, interactive: bool = True) -> int:
        """Units of the minute's budget taken in the last minute (one per call sent), all
        or only the interactive ones (the sums the budget itself checks)."""
        now = int(time.time() // 6)  # a minute is counted in ten buckets
        suffix = ":i" if interactive else ""
        keys = [f"budget:60:{bucket}{suffix}" for bucket in range(now - 10, now + 1)]
        return sum(int(value or 0) for value in await self.store.get_many(keys))


Connect = Callable[..., Upstream]


@pytest.fixture
async def connect(password_hash: str) -> AsyncIterator[Connect]:
    """Build the real UpstreamGateway (pooled client, rate budget in a memory store)."""
    clients: list[Any] = []

    def make(url: str, **overrides: Any) -> Upstream:
        settings = gateway_settings(url, password_hash, **overrides)
        http = build_http_client(settings)
        clients.append(http)
        store = MemoryStore()
        budget = RateBudget(
            store, settings.UPSTREAM_RATE_PER_MINUTE, settings.UPSTREAM_RATE_PER_HOUR
        )
        return Upstream(UpstreamGateway(settings, http, budget), store)

    yield make
    for http in clients:
        await http.aclose()


class ScriptedUpstream:
    """A tiny WispHub stand-in for shapes the simulator does not produce (no `count`, a
    `next` on another host, a redirect): it serves `rows` paginated and counts hits."""

    def __init__(self, rows: int, *, with_count: bool = True, cap: int | None = None) -> None:
        self.rows = [{"id": i} for i in range(rows)]
        self.with_count = with_count
        self.cap = cap
        self.hits: Counter[str] = Counter()
        self.headers: list[dict[str, str]] = []

    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.responses import JSONResponse, RedirectResponse
        from starlette.routing import Route

        async def page(request: Request) -> Response:
            self.hits[request.url.path] += 1
            self.headers.append(dict(request.headers))
            limit = int(request.query_params.get("limit", "10"))
            if self.cap:
                limit = min(limit, self.cap)
            offset = int(request.query_params.get("offset", "0"))
            chunk = self.rows[offset : offset + limit]
            # A `next` that must never be followed: another scheme and another host.
            nxt = (
                f"https://never-follow.invalid/api/rows/?limit={limit}&offset={offset + limit}"
                if offset + limit < len(self.rows)
                else None
            )
            body: dict[str, Any] = {"next": nxt, "previous": None, "results": chunk}
            if self.with_count:
                body["count"] = len(self.rows)
            return JSONResponse(body)

        async def flat(request: Request) -> Response:
            self.hits[request.url.path] += 1
            return JSONResponse(self.rows)

        async def moved(request: Request) -> Response:
            self.hits[request.url.path] += 1
            return RedirectResponse("/api/target/", status_code=301)

        async def target(request: Request) -> Response:
            self.hits[request.url.path] += 1
            return JSONResponse({"reached": True})

        return Starlette(
            routes=[
                Route("/api/rows/", page),
                Route("/api/flat/", flat),
                Route("/api/moved/", moved, methods=["GET", "POST"]),
                Route("/api/target/", target, methods=["GET", "POST"]),
            ]
        )


@dataclass
class Recorder:
    """A scripted backend: records each request's headers and body, answers `answer`."""

    answer: tuple[int, bytes] = (200, b'{"task_id": "t-1"}')
    requests: list[tuple[dict[str, str], bytes]] = field(default_factory=list)

    def app(self) -> Starlette:
        async def endpoint(request: Request) -> Response:
            self.requests.append((dict(request.headers), await request.body()))
            status, body = self.answer
            return Response(body, status, media_type="application/json")

        return Starlette(routes=[Route("/api/{rest:path}", endpoint, methods=["POST"])])


@pytest.fixture
def recorder() -> Iterator[tuple[Recorder, str]]:
    script = Recorder()
    with run_server(script.app()) as url:
        yield script, url


def make_settings(password_hash: str, upstream_url: str, **overrides: Any) -> Settings:
    return gateway_settings(upstream_url, password_hash, **overrides)
