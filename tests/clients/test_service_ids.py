"""Issue 17 (CALLERS.md 2): a service id that is not a positive integer of at most 10
digits answers 400 `invalid_service_id` on every service-id route, PUT included: never a
500, never a 422, never an upstream call."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.routing import Route

from isp_gateway.web.methods import MethodGuard
from tests.clients.conftest import quiet
from tests.conftest import Gateway, Pair

BAD_IDS = ["-241", "0", "0000000000", "12345678901", "1e3", "abc", "3.0", "+5", "٣"]

# A valid body for each kind of route, so only the id can be wrong.
BODIES: dict[str, dict[str, Any]] = {
    "verify": {"name": "x", "address": "y", "internet_plan_name": "z"},
    "ping": {"pings": 2},
    "diagnose": {"pings": 2},
    "": {"phone": "3001234567"},
}


def service_id_routes(gw: Gateway) -> list[tuple[str, str]]:
    """(method, path template) of every route with a service-id path parameter."""
    found = []
    for route in gw.app.routes:
        if not isinstance(route, Route) or isinstance(route, MethodGuard):
            continue
        if "{service_id" not in route.path:
            continue
        for method in sorted(route.methods or ()):
            if method != "HEAD":
                found.append((method, route.path))
    return found


def body_for(path: str) -> dict[str, Any]:
    tail = path.rstrip("/").rsplit("/", 1)[1]
    return BODIES.get(tail, BODIES[""])


def test_every_service_id_route_refuses_a_bad_id(pair: Pair) -> None:
    sim, gw = pair
    quiet(gw, sim)
    routes = service_id_routes(gw)
    # The walk sees the routes the contract names (and any added later).
    templates = {path for _, path in routes}
    assert {
        "/api/v1/clients/by-service-id/{service_id}",
        "/api/v1/clients/{service_id}",
        "/api/v1/clients/{service_id}/verify",
        "/api/v1/clients/{service_id}/account",
        "/api/v1/clients/{service_id}/tickets",
        "/api/v1/clients/{service_id}/diagnose",
        "/api/v1/{service_id}/ping",
    } <= templates
    assert ("PUT", "/api/v1/clients/{service_id}") in routes
    for method, template in routes:
        for bad in BAD_IDS:
            path = template.replace("{service_id}", bad)
            kw: dict[str, Any] = {} if method == "GET" else {"json": body_for(template)}
            response = gw.client.request(method, path, headers=gw.auth, **kw)
            assert response.status_code == 400, (method, path, response.text)
            out = response.json()
            assert (out["ok"], out["action"]) == (False, "invalid_service_id"), (method, path)
    assert sim.state.calls.total() == 0, sim.state.calls


@pytest.mark.parametrize("good", ["101", " 101", "0000000101"])
def test_a_good_id_still_answers(pair: Pair, good: str) -> None:
    _, gw = pair
    response = gw.get(f"/api/v1/clients/by-service-id/{good}")
    assert response.status_code == 200, response.text
    assert response.json()["data"]["service_id"] == 101
    # Ten digits is the most: an unknown one is a 404, not a bad id.
    assert gw.get("/api/v1/clients/by-service-id/9999999999").status_code == 404
