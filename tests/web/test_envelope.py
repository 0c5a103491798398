"""One envelope for every outcome: service errors, validation, unknown routes, crashes."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest
from fastapi.routing import iter_route_contexts
from starlette.routing import Mount

from isp_gateway.web.notfound import known_paths
from tests.conftest import API_KEY, JWT_SECRET, Gateway
from tests.support import error_body
from tests.web.conftest import unknown_path_layer

PROBE = "/api/v1/_probe"


@pytest.fixture
def gw(probe_gateway: Gateway) -> Gateway:
    return probe_gateway


def test_service_error_rendered_as_envelope(gw: Gateway) -> None:
    response = gw.get(f"{PROBE}/not-found")
    assert response.status_code == 404
    assert response.json() == error_body("client_not_found", "Client not found")


def test_locked_carries_retry_after(gw: Gateway) -> None:
    response = gw.get(f"{PROBE}/locked")
    assert response.status_code == 429
    assert response.headers["retry-after"] == "7"
    body = response.json()
    assert body["action"] == "client_verification_locked"
    assert body["ok"] is False


def test_upstream_rate_limited_is_503_with_retry_after(gw: Gateway) -> None:
    response = gw.get(f"{PROBE}/upstream-429")
    assert response.status_code == 503
    assert response.headers["retry-after"] == "12"
    assert response.json()["action"] == "upstream_rate_limited"


def test_validation_error_is_422_with_field_list(gw: Gateway) -> None:
    response = gw.post(f"{PROBE}/body", json={"pings": 0})
    assert response.status_code == 422
    body = response.json()
    assert body["ok"] is False
    assert body["type"] == "error"
    assert body["action"] == "validation_error"
    assert body["data"] is None
    assert "\n" not in body["message"]
    fields = {e["field"] for e in body["meta"]["errors"]}
    assert fields == {"body.pings", "body.name"}
    assert all(isinstance(e["message"], str) and e["message"] for e in body["meta"]["errors"])


def test_wrong_type_named(gw: Gateway) -> None:
    response = gw.post(f"{PROBE}/body", json={"pings": "many", "name": "x"})
    assert response.status_code == 422
    assert [e["field"] for e in response.json()["meta"]["errors"]] == ["body.pings"]


def test_malformed_json_is_422(gw: Gateway) -> None:
    response = gw.post(
        f"{PROBE}/body", content=b'{"pings": 4,', headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 422
    body = response.json()
    assert body["action"] == "validation_error"
    assert any(e["message"] == "Malformed JSON body" for e in body["meta"]["errors"])


@pytest.mark.parametrize("path", ["/api/v1/no-such-thing", "/nowhere", "/api/v2/clients/"])
def test_unknown_route_is_an_envelope(gw: Gateway, path: str) -> None:
    response = gw.get(path)
    assert response.status_code == 404
    assert response.json() == error_body("error", "No encontrado")


def test_unknown_route_without_token_is_still_404(gw: Gateway) -> None:
    response = gw.client.get("/api/v1/no-such-thing")
    assert response.status_code == 404
    assert response.json()["action"] == "error"


def test_unknown_paths_are_answered_before_routing_and_known_ones_are_not(gw: Gateway) -> None:
    """The 404 of an unknown path comes from the layer in front of the router, and that
    layer knows every path a route serves (with a sample value for each parameter)."""
    known = known_paths(gw.app.state.route_table)
    samples = [
        re.sub(r"\{[^}]+\}", "7", context.path) + ("/7" if isinstance(context.route, Mount) else "")
        for context in iter_route_contexts(gw.app.router.routes)
        if getattr(context, "path_regex", None) is not None
    ]
    assert "/api/v1/clients/by-document/7" in samples and "/docs-assets/7" in samples
    assert all(known.fullmatch(sample) for sample in samples)
    for unknown in ("/", "/api/v1/no-such-thing", "/api/v1/clients/7/8/9", "/healthz"):
        assert not known.fullmatch(unknown), unknown
    response = gw.client.get("/api/v1/clients/7/8/9", headers={"X-Request-ID": "scan-1"})
    assert response.status_code == 404
    assert response.json() == error_body("error", "No encontrado")
    assert response.headers["x-request-id"] == "scan-1"


def test_only_unknown_paths_are_answered_in_front_of_the_router(gw: Gateway) -> None:
    layer, passed = unknown_path_layer(gw)

    async def statuses() -> dict[str, int]:
        transport = httpx.ASGITransport(app=layer)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            paths = ["/api/v1/nope", "/", "/health", "/health/", "/api/v1/clients/by-phone/3"]
            return {path: (await client.get(path)).status_code for path in paths}

    status = asyncio.run(statuses())
    assert status == {
        "/api/v1/nope": 404,
        "/": 404,
        "/health": 299,
        "/health/": 404,  # issue 17: no redirect built from the Host header
        "/api/v1/clients/by-phone/3": 299,
    }
    assert passed == ["/health", "/api/v1/clients/by-phone/3"]


@pytest.mark.parametrize(
    "path",
    [
        "/health/",
        "/api/v1/clients/search/",
        "/api/v1/clients/by-service-id/5/",
        "/api/v1/auth/token/",
    ],
)
def test_no_redirect_from_a_host_header(gw: Gateway, path: str) -> None:
    """The other trailing slash of a served path answers 404 in the envelope (decided: no
    redirect at all, so no `Location` built from a `Host` a caller chose)."""
    for method in ("GET", "POST"):
        response = gw.client.request(
            method, path, headers={**gw.auth, "Host": "evil.example"}, follow_redirects=False
        )
        assert response.status_code == 404, (method, response.status_code)
        assert "location" not in response.headers
        assert response.json() == error_body("error", "No encontrado")


def test_wrong_method_is_an_envelope(gw: Gateway) -> None:
    response = gw.client.put("/health")
    assert response.status_code == 405
    assert response.json() == error_body("error", "Método no permitido")
    assert "GET" in response.headers["allow"]


def test_unhandled_error_is_a_generic_500(gw: Gateway, caplog: pytest.LogCaptureFixture) -> None:
    response = gw.get(f"{PROBE}/crash")
    assert response.status_code == 500
    assert response.json() == error_body("error", "Error interno del servidor")
    text = response.text
    for leak in ("Traceback", "RuntimeError", "boom", API_KEY, JWT_SECRET, "probe"):
        assert leak not in text
    # The traceback is for the server's log only.
    assert any(r.exc_info for r in caplog.records if r.name == "isp_gateway")


def test_unhandled_error_keeps_request_id_and_cors(
    gw: Gateway, caplog: pytest.LogCaptureFixture
) -> None:
    response = gw.get(
        f"{PROBE}/crash",
        headers={"Origin": "http://localhost:3000", "X-Request-ID": "bot-crash-1"},
    )
    assert response.status_code == 500
    assert response.json() == error_body("error", "Error interno del servidor")
    assert response.headers["x-request-id"] == "bot-crash-1"
    assert response.headers["access-control-allow-origin"] == "http://localhost:3000"
    # Logged once, with the request id, not a second time by the server.
    logged = [r for r in caplog.records if r.exc_info]
    assert len(logged) == 1
    assert "bot-crash-1" in logged[0].getMessage()
