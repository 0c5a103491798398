"""What the OpenAPI document promises, checked one by one against the real app (issue 12):
documented statuses and shapes, 405 with `Allow`, the body limit, schema-valid requests
accepted."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from fastapi import APIRouter, FastAPI

from isp_gateway.tickets.subjects import SubjectCatalogue
from tests.conftest import Gateway, Simulator, StartGateway, module_pair_fixtures

REF = "#/components/schemas/"


# The tests here read the document or send requests the gateway refuses (or that change
# nothing another test looks at): one simulator and one gateway serve the whole module.
simulator, gateway = module_pair_fixtures()


# The last document read: `actions` follows a response's `$ref` into it.
DOCUMENT: dict[str, Any] = {}


def openapi(gateway: Gateway) -> dict[str, Any]:
    response = gateway.client.get("/openapi.json")
    assert response.status_code == 200
    document: dict[str, Any] = response.json()
    DOCUMENT.clear()
    DOCUMENT.update(document)
    return document


def operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            yield method.upper(), path, operation


def actions(response: dict[str, Any]) -> list[str]:
    """The `action` values of an answer: in its named envelope (issue 28.10)."""
    schema = response["content"]["application/json"]["schema"]
    if "$ref" in schema:
        schema = DOCUMENT["components"]["schemas"][schema["$ref"].removeprefix(REF)]
    enum: list[str] = schema["properties"]["action"]["enum"]
    return enum


# -- the document ------------------------------------------------------------------------


def test_every_operation_documents_the_answers_that_apply_to_it(gateway: Gateway) -> None:
    document = openapi(gateway)
    assert "HTTPValidationError" not in json.dumps(document)
    for method, path, operation in operations(document):
        responses = operation["responses"]
        assert actions(responses["405"]) == ["error"], (method, path)
        assert "Allow" in responses["405"]["headers"]
        if operation.get("security"):
            assert responses["401"]["content"]["application/json"]["schema"] == {
                "$ref": REF + "AuthError"
            }
            # An unknown or revoked API key answers it too, not only a token.
            assert "API key" in responses["401"]["description"], (method, path)
        if "requestBody" in operation:
            assert actions(responses["413"]) == ["payload_too_large"], (method, path)
        if "422" in responses and path != "/api/v1/auth/token":
            assert "validation_error" in actions(responses["422"]), (method, path)
        if path.startswith("/api/v1/") and path != "/api/v1/auth/token":
            assert "rate_limited" in actions(responses["429"]), (method, path)


def test_a_replayed_answer_documents_its_header(gateway: Gateway) -> None:
    """Where a route takes `Idempotency-Key`, its answers that a repeat gets back (the
    success and the final 409 refusals) document `Idempotent-Replayed` (the docs name it;
    the document did not: seen by the docs probe)."""
    keyed = [
        (method, path, operation)
        for method, path, operation in operations(openapi(gateway))
        if any(p["name"] == "Idempotency-Key" for p in operation.get("parameters", []))
    ]
    assert len(keyed) == 3
    for method, path, operation in keyed:
        for status, response in operation["responses"].items():
            if status.startswith("2") or status == "409":
                headers = response.get("headers", {})
                assert "Idempotent-Replayed" in headers, (method, path, status)


def test_route_statuses_carry_their_actions(gateway: Gateway) -> None:
    paths = openapi(gateway)["paths"]
    by_document = paths["/api/v1/clients/by-document/{document}"]["get"]["responses"]
    assert actions(by_document["400"]) == ["invalid_document"]
    assert actions(by_document["404"]) == ["client_not_found"]
    assert actions(by_document["502"]) == ["upstream_unavailable", "CLIENT_NOT_FOUND"]
    # CALLERS.md 2: 503 `store_unavailable` is listed wherever the store can fail.
    assert actions(by_document["503"]) == ["upstream_rate_limited", "store_unavailable"]
    update = paths["/api/v1/clients/{service_id}"]["put"]["responses"]
    assert actions(update["500"]) == ["client_update_failed"]
    verify = paths["/api/v1/clients/{service_id}/verify"]["post"]["responses"]
    assert actions(verify["429"]) == ["client_verification_locked", "rate_limited"]
    assert "Retry-After" in verify["429"]["headers"]
    create = paths["/api/v1/tickets"]["post"]["responses"]
    assert actions(create["409"]) == [
        "zone_ticket_limit_reached",
        "ticket_already_open",
        "outage_in_progress",
        "idempotency_key_in_progress",
    ]
    assert actions(create["404"]) == ["client_not_found"]
    for path, method in [
        ("/api/v1/clients/{service_id}/account", "get"),
        ("/api/v1/clients/{service_id}/tickets", "get"),
        ("/api/v1/clients/{service_id}/diagnose", "post"),
    ]:
        answers = paths[path][method]["responses"]
        assert actions(answers["400"]) == ["invalid_service_id"], path
        assert actions(answers["404"]) == ["client_not_found"], path
        assert "CLIENT_NOT_FOUND" in actions(answers["502"]), path
        assert actions(answers["503"]) == ["upstream_rate_limited", "store_unavailable"], path
    ref = create["409"]["content"]["application/json"]["schema"]["$ref"]
    data = DOCUMENT["components"]["schemas"][ref.removeprefix(REF)]["properties"]["data"]
    assert {REF + "ZoneLimitData", REF + "OpenTicketResponse", REF + "Outage"} <= {
        branch.get("$ref") for branch in data["anyOf"]
    }


DIAGNOSE_OUTCOMES = {
    "service_cancelled",
    "service_suspended",
    "zone_outage",
    "stable_connection",
    "intermittent_connection",
    "no_internet",
    "ping_failed",
    "ping_pending",
}


def test_every_success_answer_documents_its_actions(gateway: Gateway) -> None:
    """CALLERS.md 2 "OpenAPI": a generated client reads each 2xx's `action` values as an
    enum (and a person in the description); every 429 and 503 says `Retry-After`; 503
    `store_unavailable` is listed on every /api/v1 operation."""
    document = openapi(gateway)
    for method, path, operation in operations(document):
        responses = operation["responses"]
        successes = [status for status in responses if status.startswith("2")]
        assert successes, (method, path)
        for status in successes:
            if path == "/api/v1/auth/token":
                continue  # the OAuth2 token answer has no envelope and no action
            values = actions(responses[status])
            assert values, (method, path, status)
            for value in values:
                shown = "null" if value is None else f"`{value}`"
                assert shown in responses[status]["description"], (method, path, value)
        for status in ("429", "503"):
            if status in responses:
                assert "Retry-After" in responses[status]["headers"], (method, path, status)
        if path.startswith("/api/v1/"):
            assert "503" in responses, (method, path)
            if path != "/api/v1/auth/token":
                assert "store_unavailable" in actions(responses["503"]), (method, path)
    paths = document["paths"]
    diagnose = paths["/api/v1/clients/{service_id}/diagnose"]["post"]["responses"]["200"]
    assert set(actions(diagnose)) == DIAGNOSE_OUTCOMES
    verify = paths["/api/v1/clients/{service_id}/verify"]["post"]["responses"]["200"]
    assert actions(verify) == ["client_verified", "client_verification_failed"]
    search = paths["/api/v1/clients/search"]["get"]["responses"]["200"]
    assert actions(search) == ["clients_listed", "client_not_found"]
    ping = paths["/api/v1/ping/{task_id}/"]["get"]["responses"]["200"]
    assert "ping_pending" in actions(ping)
    # The schema is a named envelope, its `action` enum inside (issue 28.10).
    assert diagnose["content"]["application/json"]["schema"]["$ref"].startswith(REF)


def test_answers_given_are_among_the_documented_actions(gateway: Gateway) -> None:
    """The document against the real answers: a hit, a search with none, a verify that
    fails, a refused service, each `action` is one the document lists for that route."""
    paths = openapi(gateway)["paths"]

    def documented(path: str, method: str, status: int) -> list[str]:
        return actions(paths[path][method]["responses"][str(status)])

    calls = [
        ("/api/v1/clients/search", "get", gateway.get("/api/v1/clients/search?q=zzzzqqq")),
        ("/api/v1/clients/search", "get", gateway.get("/api/v1/clients/search?q=a")),
        ("/api/v1/tickets/subjects", "get", gateway.get("/api/v1/tickets/subjects")),
        ("/api/v1/payment-methods", "get", gateway.get("/api/v1/payment-methods")),
        ("/api/v1/internet-plans/", "get", gateway.get("/api/v1/internet-plans/")),
    ]
    listed = gateway.get("/api/v1/clients/").json()["data"]
    sid = listed[0]["service_id"]
    calls += [
        (
            "/api/v1/clients/by-service-id/{service_id}",
            "get",
            gateway.get(f"/api/v1/clients/by-service-id/{sid}"),
        ),
        (
            "/api/v1/clients/{service_id}/verify",
            "post",
            gateway.post(
                f"/api/v1/clients/{sid}/verify",
                json={"name": "NADIE", "address": "NINGUNA", "internet_plan_name": "NINGUNO"},
            ),
        ),
    ]
    for path, method, response in calls:
        assert response.status_code in (200, 201), (path, response.text)
        assert response.json()["action"] in documented(path, method, response.status_code), path


def test_token_endpoint_documents_its_oauth2_shapes(gateway: Gateway) -> None:
    responses = openapi(gateway)["paths"]["/api/v1/auth/token"]["post"]["responses"]
    for status in ("401", "422", "429"):
        schema = responses[status]["content"]["application/json"]["schema"]
        assert schema == {"$ref": REF + "AuthError"}, status
    assert "Retry-After" in responses["429"]["headers"]
    # And the 422 it answers has that shape.
    answer = gateway.client.post("/api/v1/auth/token", data={"username": "bot"})
    assert answer.status_code == 422
    assert set(answer.json()) == {"detail"} and isinstance(answer.json()["detail"], str)


def test_constraints_the_code_enforces_are_in_the_schema(gateway: Gateway) -> None:
    document = openapi(gateway)
    paths, schemas = document["paths"], document["components"]["schemas"]
    search = paths["/api/v1/clients/search"]["get"]["parameters"]
    q = next(p for p in search if p["name"] == "q")
    assert q["required"] is True and q["schema"]["minLength"] == 1
    lookup = paths["/api/v1/clients/by-document/{document}"]["get"]["parameters"][0]
    assert lookup["schema"]["pattern"] == r"^[\t-\r ]*[A-Za-z0-9]{3,20}[\t-\r ]*$"
    assert "pattern" in paths["/api/v1/clients/by-phone/{phone}"]["get"]["parameters"][0]["schema"]
    # Verify and resolve: one branch per three of the four fields, each present and not blank
    # (under `allOf`, so that a generator makes one class of the body: issue 28.13).
    branches = schemas["VerifyRequest"]["allOf"][0]["anyOf"]
    assert len(branches) == 4 and all(len(b["required"]) == 3 for b in branches)
    update = schemas["UpdateClientRequest"]["allOf"][0]["anyOf"]
    assert {len(b["required"]) for b in update} == {1}
    subject = schemas["CreateTicketRequest"]["properties"]["subject"]
    assert subject["enum"] == SubjectCatalogue.load().as_data()["all"]


def test_docs_pages_load_nothing_from_elsewhere(gateway: Gateway) -> None:
    for page in ("/docs", "/redoc"):
        response = gateway.client.get(page)
        assert response.status_code == 200
        assert "https://" not in response.text and "http://" not in response.text, page
        assert "/docs-assets/" in response.text
        assert "default-src 'self'" in response.headers["content-security-policy"]
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js"):
        response = gateway.client.get(f"/docs-assets/{asset}")
        assert response.status_code == 200 and len(response.content) > 10_000, asset


# -- schema-valid requests are accepted ------------------------------------------------------


def test_an_integral_number_is_an_integer(gateway: Gateway, simulator: Simulator) -> None:
    service_id = simulator.state.dataset.clients[0]["id_servicio"]
    # JSON Schema's "integer" accepts 4.0; so does the service. A fraction stays a wrong type.
    response = gateway.post(f"/api/v1/{service_id}/ping/", json={"pings": 4.0})
    assert response.status_code == 200, response.text
    assert response.json()["action"] == "ping_created"
    response = gateway.post(f"/api/v1/{service_id}/ping/", json={"pings": 4.5})
    assert response.status_code == 422


def test_a_body_that_is_not_utf8_is_malformed_json(gateway: Gateway) -> None:
    response = gateway.post(
        "/api/v1/clients/resolve",
        content=b"\xff\xfe\x00{",
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 422
    assert response.json()["action"] == "validation_error"


def test_a_service_id_longer_than_documented_is_invalid(gateway: Gateway) -> None:
    response = gateway.get("/api/v1/clients/by-service-id/" + "1" * 19)
    assert response.status_code == 400
    assert response.json()["action"] == "invalid_service_id"
    # Thousands of digits: still the envelope's 400, not a crash in int().
    assert gateway.get("/api/v1/clients/by-service-id/" + "7" * 5000).status_code == 400


# -- 405 -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        # A fixed path a parameterised route of another method also matches.
        ("PUT", "/api/v1/clients/resolve", "POST"),
        ("PUT", "/api/v1/clients/search", "GET"),
        ("DELETE", "/api/v1/clients/131", "PUT"),
        ("GET", "/api/v1/tickets", "POST"),
        ("PATCH", "/api/v1/auth/token", "POST"),
        ("POST", "/health", "GET"),
    ],
)
def test_wrong_method_is_405_with_allow(
    gateway: Gateway, method: str, path: str, allow: str
) -> None:
    response = gateway.client.request(method, path, headers=gateway.auth, json={})
    assert response.status_code == 405
    assert response.headers["allow"] == allow
    body = response.json()
    assert (body["ok"], body["action"], body["message"]) == (False, "error", "Método no permitido")


def test_a_non_numeric_id_on_the_parameter_route_is_invalid_service_id(gateway: Gateway) -> None:
    # CALLERS.md 2: 400 `invalid_service_id` on every service-id route (it was 422).
    response = gateway.put("/api/v1/clients/abc", json={"phone": "3001234567"})
    assert response.status_code == 400
    assert response.json()["action"] == "invalid_service_id"


def _two_routers_one_path(app: FastAPI) -> None:
    first, second = APIRouter(), APIRouter()

    @first.get("/api/v1/_shared")
    async def read() -> dict[str, str]:
        return {}

    @second.delete("/api/v1/_shared")
    async def remove() -> dict[str, str]:
        return {}

    app.include_router(first)
    app.include_router(second)


def test_allow_lists_the_methods_of_every_route_of_the_path(
    simulator: Simulator, start_gateway: StartGateway
) -> None:
    gateway = start_gateway(simulator.url, prepare=_two_routers_one_path)
    response = gateway.client.patch("/api/v1/_shared")
    assert response.status_code == 405
    assert response.headers["allow"] == "DELETE, GET"


# -- body limit ------------------------------------------------------------------------------

LIMIT = 2048


@pytest.fixture
def small_limit(simulator: Simulator, start_gateway: StartGateway) -> Gateway:
    return start_gateway(simulator.url, MAX_BODY_BYTES=LIMIT)


def _raw_exchange(url: str, head: bytes) -> bytes:
    """Send only a request head (no body) and read what the server answers."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    with socket.create_connection((parts.hostname, parts.port), timeout=20) as sock:
        sock.sendall(head)
        received = b""
        while b"\r\n\r\n" not in received or not received.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
        return received


def test_declared_length_over_the_limit_is_refused_before_the_body(small_limit: Gateway) -> None:
    head = (
        "POST /api/v1/clients/resolve HTTP/1.1\r\n"
        f"Host: {urlsplit(small_limit.url).netloc}\r\n"
        f"Authorization: Bearer {small_limit.token}\r\n"
        "Content-Type: application/json\r\n"
        "Content-Length: 10000000\r\n\r\n"
    ).encode()
    # No byte of the 10 MB is sent: an answer proves nothing waited for it.
    answer = _raw_exchange(small_limit.url, head)
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 413"), answer[:200]
    body = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert body["action"] == "payload_too_large" and body["ok"] is False


def oversized_chunks() -> Iterator[bytes]:
    """A chunked JSON body of 16 KiB and more, declaring no length: over LIMIT."""
    yield b'{"name": "'
    for _ in range(64):
        yield b"x" * 256
    yield b'"}'


def test_a_chunked_upload_counts_too(small_limit: Gateway) -> None:
    response = small_limit.post("/api/v1/clients/resolve", content=oversized_chunks())
    assert response.status_code == 413
    assert response.json()["action"] == "payload_too_large"


def test_the_limit_applies_to_the_token_form_and_spares_small_bodies(small_limit: Gateway) -> None:
    response = small_limit.client.post(
        "/api/v1/auth/token", data={"username": "bot", "password": "x" * (LIMIT + 1)}
    )
    assert response.status_code == 413
    assert response.json()["action"] == "payload_too_large"
    small = small_limit.post("/api/v1/clients/resolve", json={"name": "x" * (LIMIT // 2)})
    assert small.status_code == 400  # read and judged: fewer than 3 fields


def test_max_body_bytes_default_is_64_kib(gateway: Gateway) -> None:
    assert gateway.settings.MAX_BODY_BYTES == 65536
    body = {"name": "x" * 70_000, "address": "a", "internet_plan_name": "b"}
    response = gateway.post("/api/v1/clients/resolve", json=body)
    assert response.status_code == 413
    assert response.json()["action"] == "payload_too_large"
