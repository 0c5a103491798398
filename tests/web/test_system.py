"""System surface: /health, the explorers, OpenAPI metadata, CORS, request ids, auth coverage."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.conftest import Gateway, Simulator, StartGateway, module_pair_fixtures

SPEC_TAGS = ["system", "Clients", "tickets", "network", "internet-plans"]
SPEC_ORIGINS = [
    "http://localhost",
    "http://localhost:3000",
    "http://localhost:8080",
    "http://localhost:8081",
    "http://localhost:8082",
]


# The tests that take `gateway` only read the app and are refused: one pair serves them all.
simulator, gateway = module_pair_fixtures()


@pytest.fixture
def gw(probe_gateway: Gateway) -> Gateway:
    return probe_gateway


def test_health_exactly_as_spec(gw: Gateway) -> None:
    response = gw.client.get("/health")  # no token
    assert response.status_code == 200
    assert response.json() == {
        "ok": True,
        "type": "success",
        "action": None,
        "data": {"status": "ok", "service": "isp-gateway"},
        "message": None,
        "meta": None,
    }


def test_health_needs_no_upstream(start_gateway: StartGateway) -> None:
    gw = start_gateway("http://127.0.0.1:9")  # nothing listens there
    assert gw.client.get("/health").status_code == 200


def test_docs_and_redoc(gw: Gateway) -> None:
    docs = gw.client.get("/docs")
    assert docs.status_code == 200
    assert "swagger-ui" in docs.text
    assert "/openapi.json" in docs.text
    assert '"persistAuthorization": true' in docs.text
    redoc = gw.client.get("/redoc")
    assert redoc.status_code == 200
    assert "redoc" in redoc.text.lower()


def openapi(gw: Gateway) -> dict[str, Any]:
    response = gw.client.get("/openapi.json")
    assert response.status_code == 200
    schema: dict[str, Any] = response.json()
    return schema


def test_openapi_metadata(gateway: Gateway) -> None:
    schema = openapi(gateway)
    assert schema["info"]["version"] == "1.0.0"
    assert schema["info"]["title"]
    assert len(schema["info"]["description"]) > 40
    assert [t["name"] for t in schema["tags"]] == SPEC_TAGS


def test_authorize_button_uses_the_password_flow(gateway: Gateway) -> None:
    # CALLERS.md 3: the password flow, and beside it an API key header.
    schemes = openapi(gateway)["components"]["securitySchemes"]
    assert sorted(scheme["type"] for scheme in schemes.values()) == ["apiKey", "oauth2"]
    (scheme,) = (s for s in schemes.values() if s["type"] == "oauth2")
    assert scheme["flows"]["password"]["tokenUrl"] == "/api/v1/auth/token"
    (key,) = (s for s in schemes.values() if s["type"] == "apiKey")
    assert key["in"] == "header" and key["name"] == "X-API-Key"


def test_token_endpoint_declares_a_form_body(gateway: Gateway) -> None:
    operation = openapi(gateway)["paths"]["/api/v1/auth/token"]["post"]
    assert list(operation["requestBody"]["content"]) == ["application/x-www-form-urlencoded"]
    assert "security" not in operation
    assert "security" not in openapi(gateway)["paths"]["/health"]["get"]


def test_every_operation_is_tagged_with_a_spec_tag(gateway: Gateway) -> None:
    for path, operations in openapi(gateway)["paths"].items():
        for method, operation in operations.items():
            tags = operation.get("tags", [])
            assert tags and set(tags) <= set(SPEC_TAGS), f"{method.upper()} {path}: {tags}"


def test_every_business_route_requires_a_token(gateway: Gateway, simulator: Simulator) -> None:
    # One forgotten dependency would leak data through one door (DECISIONS.md, Auth).
    schema = openapi(gateway)
    checked = 0
    for path, operations in schema["paths"].items():
        if path in ("/health", "/api/v1/auth/token"):
            continue
        assert path.startswith("/api/v1/"), path
        url = re.sub(r"\{[^}]+\}", "1", path)
        for method, operation in operations.items():
            assert operation.get("security"), f"{method.upper()} {path} is not protected"
            response = gateway.client.request(method.upper(), url, json={})
            assert response.status_code == 401, f"{method.upper()} {path}"
            assert response.json() == {"detail": "Could not validate credentials."}
            assert response.headers["www-authenticate"] == "Bearer"
            checked += 1
    assert checked >= 1
    assert simulator.state.calls.get("POST /api/tickets/", 0) == 0


def _preflight(gw: Gateway, origin: str) -> Any:
    return gw.client.options(
        "/api/v1/clients/",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "authorization, content-type",
        },
    )


@pytest.mark.parametrize("origin", SPEC_ORIGINS)
def test_cors_default_origins_allowed(gw: Gateway, origin: str) -> None:
    response = _preflight(gw, origin)
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == origin
    allowed = response.headers["access-control-allow-headers"].lower()
    assert "authorization" in allowed
    assert "content-type" in allowed


def test_cors_allows_every_caller_header(gw: Gateway) -> None:
    """A web front end with an API key sends the same headers as a bot (CALLERS.md)."""
    asked = "x-api-key, x-end-user-id, x-verification-id, idempotency-key, x-request-id"
    response = gw.client.options(
        "/api/v1/clients/",
        headers={
            "Origin": SPEC_ORIGINS[0],
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": asked,
        },
    )
    assert response.status_code == 200, response.text
    allowed = response.headers["access-control-allow-headers"].lower()
    for header in asked.split(", "):
        assert header in allowed


@pytest.mark.parametrize("origin", ["https://evil.example.com", "http://localhost:9999"])
def test_cors_other_origins_denied(gw: Gateway, origin: str) -> None:
    response = _preflight(gw, origin)
    assert response.status_code == 400
    assert "access-control-allow-origin" not in response.headers


def test_cors_simple_request_exposes_request_id(gw: Gateway) -> None:
    response = gw.client.get("/health", headers={"Origin": "http://localhost:3000"})
    assert response.headers["access-control-allow-origin"] == "http://localhost:3000"
    assert "x-request-id" in response.headers["access-control-expose-headers"].lower()
    denied = gw.client.get("/health", headers={"Origin": "https://evil.example.com"})
    assert "access-control-allow-origin" not in denied.headers


def test_cors_origins_from_settings(start_probe_gateway: StartGateway) -> None:
    # A trailing slash, as people paste origins from the address bar, still matches.
    gw = start_probe_gateway(CORS_ORIGINS="https://bot.example.com/,https://web.example.com")
    assert _preflight(gw, "https://bot.example.com").status_code == 200
    assert _preflight(gw, "https://web.example.com").status_code == 200
    assert _preflight(gw, "http://localhost:3000").status_code == 400


def test_request_id_kept_when_sane(gw: Gateway) -> None:
    response = gw.client.get("/health", headers={"X-Request-ID": "bot-42.a_b"})
    assert response.headers["x-request-id"] == "bot-42.a_b"


@pytest.mark.parametrize("incoming", ["has spaces", "x" * 65, "<script>", "a\tb"])
def test_request_id_replaced_when_not(gw: Gateway, incoming: str) -> None:
    response = gw.client.get("/health", headers={"X-Request-ID": incoming})
    # Replaced by our own id: a per-process random prefix and a counter.
    assert re.fullmatch(r"[0-9a-f]{12}-[0-9a-f]+", response.headers["x-request-id"])


def test_request_id_generated_and_unique(gw: Gateway) -> None:
    ids = {gw.client.get("/health").headers["x-request-id"] for _ in range(5)}
    assert len(ids) == 5
    assert gw.client.get("/nowhere").headers["x-request-id"]
    assert gw.client.get("/api/v1/_probe/whoami").headers["x-request-id"]  # 401 too
