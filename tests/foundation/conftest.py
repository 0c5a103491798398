"""Fixtures for the foundation's tests: settings values, window guards, a scripted upstream."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi import APIRouter, Depends, FastAPI
from pydantic import BaseModel, Field

from isp_gateway.auth.dependencies import CurrentCaller, current_caller
from isp_gateway.kit.errors import Locked, NotFound, UpstreamRateLimited
from isp_gateway.settings import Settings
from isp_gateway.web.notfound import UnknownPathMiddleware
from tests.conftest import (
    API_KEY,
    JWT_SECRET,
    USERNAME,
    Gateway,
    _start_gateway,
    gateway_settings,
)


def required_env(password_hash: str) -> dict[str, str]:
    """The five required settings, valid, as environment variables."""
    return {
        "UPSTREAM_NET_KEY": API_KEY,
        "UPSTREAM_NET_HOST": "http://127.0.0.1:9",
        "JWT_SECRET_KEY": JWT_SECRET,
        "API_USERNAME": USERNAME,
        "API_PASSWORD_HASH": password_hash,
    }


def wait_for_fresh_window(length: int, margin: float = 3.0) -> None:
    """Counters in fixed windows reset at the boundary: start a test well inside one."""
    left = length - (time.time() % length)
    if left < margin:
        time.sleep(left + 0.05)


class ProbeRequest(BaseModel):
    pings: int = Field(ge=1, le=20)
    name: str


def add_probe_routes(app: FastAPI) -> None:
    """Throwaway routes on a real app (the Starlette way of testing handlers): a protected
    echo of the token subject, a body to validate, and crashes of every kind."""
    router = APIRouter(prefix="/api/v1/_probe", dependencies=[Depends(current_caller)])

    @router.get("/whoami")
    async def whoami(caller: CurrentCaller) -> dict[str, Any]:
        return {"sub": caller.caller.removeprefix("jwt:")}

    @router.post("/body")
    async def body(payload: ProbeRequest) -> dict[str, Any]:
        return payload.model_dump()

    @router.get("/crash")
    async def crash() -> None:
        raise RuntimeError("boom")

    @router.get("/not-found")
    async def not_found() -> None:
        raise NotFound("Client not found", action="client_not_found")

    @router.get("/locked")
    async def locked() -> None:
        raise Locked(action="client_verification_locked", retry_after=7)

    @router.get("/upstream-429")
    async def upstream_429() -> None:
        raise UpstreamRateLimited(12.4)

    app.include_router(router)


@pytest.fixture
def start_probe_gateway(start_gateway: Callable[..., Gateway]) -> Callable[..., Gateway]:
    """Like `start_gateway`, with the probe routes added to the real app before it runs."""

    def start(upstream_url: str = "http://127.0.0.1:9", **overrides: Any) -> Gateway:
        return start_gateway(upstream_url, prepare=add_probe_routes, **overrides)

    return start


@pytest.fixture(scope="module")
def probe_gateway(password_hash: str) -> Iterator[Gateway]:
    """One probe gateway with default settings shared by a module's read-only tests."""
    with contextlib.ExitStack() as stack:
        yield _start_gateway(stack, password_hash, "http://127.0.0.1:9", prepare=add_probe_routes)


def unknown_path_layer(gw: Gateway) -> tuple[UnknownPathMiddleware, list[str]]:
    """The 404 layer of unknown paths, with the gateway's route table, in front of a stand-in
    router that answers 299 and records each path it is passed (the list returned)."""
    passed: list[str] = []

    async def router(scope: Any, receive: Any, send: Any) -> None:
        passed.append(scope["path"])
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    return UnknownPathMiddleware(router, routes=gw.app.state.route_table), passed


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
        from starlette.requests import Request
        from starlette.responses import JSONResponse, RedirectResponse, Response
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


def make_settings(password_hash: str, upstream_url: str, **overrides: Any) -> Settings:
    return gateway_settings(upstream_url, password_hash, **overrides)
