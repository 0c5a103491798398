"""Scopes on every route (CALLERS.md 3) and the audit of refusals and logins (CALLERS.md 4),
on the real app with a real simulator, real keys in a real key file and real JWTs."""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute

from isp_gateway.auth import keys
from isp_gateway.auth.dependencies import current_caller, scoped_caller
from isp_gateway.auth.keys import generate_key, new_entry, write_key_entries
from isp_gateway.web.methods import MethodGuard
from tests.conftest import PASSWORD, USERNAME, Gateway, Simulator, _start_gateway, _start_simulator
from tests.support import wait_for_fresh_window

# CALLERS.md 3, written out: a route given another scope (or none) fails below.
EXPECTED: dict[tuple[str, str], str] = {
    ("GET", "/api/v1/clients/"): keys.CLIENTS_READ,
    ("GET", "/api/v1/clients/search"): keys.CLIENTS_READ,
    ("GET", "/api/v1/clients/by-document/{document}"): keys.CLIENTS_READ,
    ("GET", "/api/v1/clients/by-phone/{phone}"): keys.CLIENTS_READ,
    ("GET", "/api/v1/clients/by-service-id/{service_id}"): keys.CLIENTS_READ,
    ("POST", "/api/v1/clients/resolve"): keys.CLIENTS_VERIFY,
    ("POST", "/api/v1/clients/{service_id}/verify"): keys.CLIENTS_VERIFY,
    ("PUT", "/api/v1/clients/{service_id}"): keys.CLIENTS_WRITE,
    ("GET", "/api/v1/clients/{service_id}/account"): keys.ACCOUNTS_READ,
    ("GET", "/api/v1/payment-methods"): keys.ACCOUNTS_READ,
    ("GET", "/api/v1/tickets/subjects"): keys.TICKETS_READ,
    ("GET", "/api/v1/tickets/zone-blocked/{zone_id}"): keys.TICKETS_READ,
    ("GET", "/api/v1/tickets/{ticket_id}"): keys.TICKETS_READ,
    ("GET", "/api/v1/clients/{service_id}/tickets"): keys.TICKETS_READ,
    ("POST", "/api/v1/tickets"): keys.TICKETS_WRITE,
    ("POST", "/api/v1/{service_id}/ping/"): keys.NETWORK_PING,
    ("GET", "/api/v1/ping/{task_id}/"): keys.NETWORK_PING,
    ("POST", "/api/v1/clients/{service_id}/diagnose"): keys.NETWORK_PING,
    ("GET", "/api/v1/internet-plans/"): keys.PLANS_READ,
    ("GET", "/api/v1/internet-plans/{plan_id}"): keys.PLANS_READ,
    ("GET", "/api/v1/audit"): keys.AUDIT_READ,
    ("GET", "/api/v1/outages"): keys.OUTAGES_READ,
    ("POST", "/api/v1/clients/{service_id}/payment-promise"): keys.PAYMENTS_PROMISE,
    ("POST", "/api/v1/clients/{service_id}/payment-reports"): keys.PAYMENTS_REPORT,
}
# The money routes need a verification of the service whatever REQUIRE_VERIFICATION says
# (MONEY.md): past the scope check they answer 403 `verification_required` to a call
# without one.
ALWAYS_VERIFIED = {
    ("POST", "/api/v1/clients/{service_id}/payment-promise"),
    ("POST", "/api/v1/clients/{service_id}/payment-reports"),
}
# Anyone may call these (and every path outside /api/v1/: probes, metrics, docs).
TOKEN = "/api/v1/auth/token"
PUBLIC = {"/health", TOKEN}
DOCUMENT = "12345678"
PHONE = "3001234567"


def name_of(scope: str, prefix: str) -> str:
    return f"{prefix}-{scope.replace(':', '-')}"


class Keys:
    """A key file holding, per scope, a key with only it and a key with every other one,
    plus an auditor (audit:read only) and a capped key (plans:read, 3 a minute)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.only: dict[str, str] = {}
        self.all_but: dict[str, str] = {}
        entries = []
        for scope in keys.SCOPES:
            self.only[scope] = generate_key()
            entries.append(new_entry(self.only[scope], name_of(scope, "only"), [scope], None))
            self.all_but[scope] = generate_key()
            others = [s for s in keys.SCOPES if s != scope]
            entries.append(new_entry(self.all_but[scope], name_of(scope, "all-but"), others, None))
        self.auditor = generate_key()
        entries.append(new_entry(self.auditor, "auditor", [keys.AUDIT_READ], None))
        self.capped = generate_key()
        entries.append(new_entry(self.capped, "capped", [keys.PLANS_READ], 3))
        self.capped_twin = generate_key()
        entries.append(new_entry(self.capped_twin, "capped-twin", [keys.PLANS_READ], 3))
        write_key_entries(path, entries)

    def every(self) -> list[str]:
        return [*self.only.values(), *self.all_but.values(), self.auditor, self.capped]


@pytest.fixture(scope="module")
def pair(password_hash: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    path = tmp_path_factory.mktemp("scopes") / "keys.json"
    made = Keys(path)
    with contextlib.ExitStack() as stack:
        sim = _start_simulator(stack)
        gw = _start_gateway(
            stack, password_hash, sim.url, API_KEYS_FILE=str(path), LOGIN_MAX_FAILURES=3
        )
        yield sim, gw, made


@pytest.fixture(scope="module")
def gw(pair: tuple[Simulator, Gateway, Keys]) -> Gateway:
    return pair[1]


@pytest.fixture(scope="module")
def made(pair: tuple[Simulator, Gateway, Keys]) -> Keys:
    return pair[2]


def route_scopes(route: APIRoute) -> tuple[bool, set[str]]:
    """(resolves the caller, the scopes its Scoped dependencies require)."""
    caller = False
    scopes: set[str] = set()
    stack = [route.dependant]
    while stack:
        dependant = stack.pop()
        if dependant.call is current_caller:
            caller = True
        if dependant.call is scoped_caller:
            scopes.update(dependant.own_oauth_scopes or ())
        stack.extend(dependant.dependencies)
    return caller, scopes


def protected_routes(gw: Gateway) -> list[tuple[str, str, str]]:
    """(method, path, scope) of every route of the app that is not public; fails on a
    protected route without exactly one scope, or a public route reading no credential."""
    found = []
    for route in gw.app.routes:
        if isinstance(route, MethodGuard):
            continue  # answers 405 only
        public = not route.path.startswith("/api/v1/") or route.path == TOKEN
        if not isinstance(route, APIRoute):
            assert public, route.path  # docs pages, the document, the probes
            continue
        caller, scopes = route_scopes(route)
        if public:
            assert not caller and not scopes, route.path
            continue
        assert caller, f"{route.path} does not check a credential"
        assert len(scopes) == 1, f"{sorted(route.methods)} {route.path} has scopes {scopes}"
        for method in route.methods:
            found.append((method, route.path, next(iter(scopes))))
    return found


def test_every_route_has_its_scope_in_the_app_and_the_document(gw: Gateway) -> None:
    routes = protected_routes(gw)
    # The hidden twins (a trailing slash) hold the same scope as their documented route.
    for method, path, scope in routes:
        documented = EXPECTED.get((method, path)) or EXPECTED.get((method, path.rstrip("/")))
        documented = documented or EXPECTED.get((method, path + "/"))
        assert documented == scope, (method, path, scope)
    assert {(m, p) for m, p, _ in routes} >= set(EXPECTED)
    document = gw.client.get("/openapi.json").json()
    schemes = document["components"]["securitySchemes"]
    seen = set()
    for path, item in document["paths"].items():
        for method, operation in item.items():
            security = operation.get("security")
            if path in PUBLIC:
                assert not security, path
                continue
            scope = EXPECTED[(method.upper(), path)]
            # Either scheme, each naming the scope: /docs can Authorize with either.
            assert sorted(security, key=json.dumps) == sorted(
                [{name: [scope]} for name in schemes], key=json.dumps
            ), (method, path, security)
            refusal = operation["responses"]["403"]
            assert "insufficient_scope" in json.dumps(refusal), (method, path)
            seen.add((method.upper(), path))
    assert seen == set(EXPECTED)


def url_of(path: str) -> str:
    url = path.replace("{document}", DOCUMENT).replace("{phone}", PHONE)
    return re.sub(r"\{[^}]+\}", "101", url)


def call(gw: Gateway, method: str, path: str, headers: dict[str, str]) -> httpx.Response:
    body = None if method == "GET" else {}
    return gw.client.request(method, url_of(path), json=body, headers=headers)


def test_each_scope_refuses_every_route_but_its_own(gw: Gateway, made: Keys) -> None:
    routes = protected_routes(gw)
    for method, path, scope in routes:
        # Every other scope together is not enough, by either header.
        for headers in (
            {"X-API-Key": made.all_but[scope]},
            {"Authorization": f"Bearer {made.all_but[scope]}"},
        ):
            refused = call(gw, method, path, headers)
            assert refused.status_code == 403, (method, path, refused.text)
            body = refused.json()
            assert body["action"] == "insufficient_scope", (method, path)
            assert body["data"] == {"required": scope}
        # The scope alone is enough to get past the check (whatever the route then says).
        allowed = call(gw, method, path, {"X-API-Key": made.only[scope]})
        # And the spec's JWT user holds every scope.
        as_jwt = call(gw, method, path, gw.auth)
        for answer in (allowed, as_jwt):
            if (method, path.rstrip("/")) in ALWAYS_VERIFIED:
                assert answer.status_code == 403, (method, path, answer.text)
                assert answer.json()["action"] == "verification_required", (method, path)
            else:
                assert answer.status_code not in (401, 403), (method, path, answer.text)


def test_a_key_is_never_read_as_a_jwt_nor_a_jwt_rescued_by_a_key(gw: Gateway) -> None:
    url = "/api/v1/internet-plans/"
    unknown = generate_key()
    for headers in (
        {"X-API-Key": unknown},
        {"Authorization": f"Bearer {unknown}"},
        # A bad key beside a good JWT: the key is what is presented, and it fails.
        {"X-API-Key": unknown, **gw.auth},
        {"X-API-Key": "", **gw.auth},
    ):
        response = gw.client.get(url, headers=headers)
        assert response.status_code == 401, headers
        assert response.json() == {"detail": "Could not validate credentials."}
        assert response.headers["www-authenticate"] == "Bearer"


def test_a_keys_rate_caps_it_alone(gw: Gateway, made: Keys) -> None:
    wait_for_fresh_window(60, margin=10)
    url = "/api/v1/internet-plans/"
    for _ in range(3):
        assert gw.client.get(url, headers={"X-API-Key": made.capped}).status_code == 200
    for _ in range(5):  # a loop of the same call stays refused
        refused = gw.client.get(url, headers={"X-API-Key": made.capped})
        assert refused.status_code == 429
        assert refused.json()["action"] == "rate_limited"
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
    # Another key of the same scopes and rate, and the JWT user, are not touched.
    assert gw.client.get(url, headers={"X-API-Key": made.capped_twin}).status_code == 200
    assert gw.get(url).status_code == 200


def audit(gw: Gateway, made: Keys, **query: Any) -> list[dict[str, Any]]:
    response = gw.client.get(
        "/api/v1/audit", params={"limit": 500, **query}, headers={"X-API-Key": made.auditor}
    )
    assert response.status_code == 200, response.text
    assert response.json()["action"] == "audit_listed"
    events: list[dict[str, Any]] = response.json()["data"]
    return events


def test_refusals_are_audited_without_personal_data(gw: Gateway, made: Keys) -> None:
    path = "/api/v1/clients/by-document/{document}"
    denied = made.only[keys.PLANS_READ]
    for _ in range(3):
        assert call(gw, "GET", path, {"X-API-Key": denied}).status_code == 403
    events = audit(gw, made, event="scope_denied", caller=name_of(keys.PLANS_READ, "only"))
    # CALLERS.md 6: refusals are counted, one event per caller and minute (a minute may
    # turn between the three: then two events), their counts adding up.
    assert sum(e["details"]["count"] for e in events) == 3 and len(events) <= 2
    event = events[-1]
    assert event["outcome"] == "denied"
    assert event["end_user"] == name_of(keys.PLANS_READ, "only")
    assert event["address"] == "127.0.0.1"
    assert event["request_id"]
    assert event["details"] == {
        "required": "clients:read",
        "method": "GET",
        "route": path,
        "count": event["details"]["count"],
    }
    text = json.dumps(audit(gw, made))
    assert DOCUMENT not in text and PHONE not in text
    assert all(key not in text for key in made.every())
    # The auditor's own scope is needed to read it.
    refused = gw.client.get("/api/v1/audit", headers={"X-API-Key": denied})
    assert refused.status_code == 403
    assert refused.json()["data"] == {"required": "audit:read"}


def test_logins_are_audited_and_no_password_is_kept(
    gw: Gateway, made: Keys, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="isp_gateway")
    token_url = "/api/v1/auth/token"
    wrong = "not-the-password-Zq81"
    # A password typed into the username field must not reach the audit either.
    stray = "my-Secret-Pass-77"
    ok = gw.client.post(token_url, data={"username": USERNAME, "password": PASSWORD})
    assert ok.status_code == 200
    # Until that "username" is locked (the lock is logged).
    stray_statuses = [
        gw.client.post(token_url, data={"username": stray, "password": wrong}).status_code
        for _ in range(3)
    ]
    assert stray_statuses == [401, 401, 401]
    statuses = [
        gw.client.post(token_url, data={"username": USERNAME, "password": wrong}).status_code
        for _ in range(4)
    ]
    assert statuses == [401, 401, 401, 429]
    events = audit(gw, made, event="login")
    outcomes = [(e["outcome"], e["caller"]) for e in events[:8]]
    assert outcomes == [
        ("locked", f"jwt:{USERNAME}"),
        *[("failed", f"jwt:{USERNAME}")] * 3,
        *[("failed", "login:unknown-user")] * 3,
        ("ok", f"jwt:{USERNAME}"),
    ]
    assert events[0]["details"]["retry_after"] >= 1
    assert all(e["address"] == "127.0.0.1" for e in events[:8])
    everything = json.dumps(audit(gw, made)) + "\n".join(r.getMessage() for r in caplog.records)
    for secret in (PASSWORD, wrong, stray, gw.settings.API_PASSWORD_HASH.get_secret_value()):
        assert secret not in everything
    assert all(key not in everything for key in made.every())
    audit_lines = [r for r in caplog.records if r.name == "isp_gateway.audit"]
    assert any('"event":"login"' in r.getMessage() for r in audit_lines)
    assert any("login locked" in r.getMessage() for r in caplog.records)
