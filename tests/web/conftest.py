"""Helpers for the tests of the HTTP edges."""

from __future__ import annotations

from typing import Any

from isp_gateway.web.notfound import UnknownPathMiddleware
from tests.conftest import Gateway


def unknown_path_layer(gw: Gateway) -> tuple[UnknownPathMiddleware, list[str]]:
    """The 404 layer of unknown paths, with the gateway's route table, in front of a stand-in
    router that answers 299 and records each path it is passed (the list returned)."""
    passed: list[str] = []

    async def router(scope: Any, receive: Any, send: Any) -> None:
        passed.append(scope["path"])
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    return UnknownPathMiddleware(router, routes=gw.app.state.route_table), passed
