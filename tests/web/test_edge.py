"""CALLERS.md 6 "The cost of refusing", on every route: the edge (web/edge.py) answers an
unknown path, a malformed JSON body, a missing or refused credential and a key without the
route's scope before routing, and each answer is the regular stack's byte for byte, counted
in the audit as the regular stack counts it.

The regular answer is had from the same gateway with an `Origin` it does not allow: the edge
leaves a browser's request to CORS and the regular stack, which answer it as before."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from isp_gateway.auth import keys
from isp_gateway.web.edge import Edge
from tests.auth import test_scopes
from tests.auth.test_scopes import EXPECTED, Keys, audit
from tests.conftest import Gateway, _start_gateway, _start_simulator

# Not among CORS_ORIGINS: CORS adds nothing, the regular stack answers.
BROWSER = {"Origin": "https://not-allowed.example"}
SAMPLE = {
    "document": "12345678",
    "phone": "3001234567",
    "service_id": "101",
    "zone_id": "1",
    "ticket_id": "1",
    "task_id": "t-1",
    "plan_id": "1",
}
JSON_ROUTES = sorted(
    (method, path)
    for method, path in EXPECTED
    if method in {"POST", "PUT"} and not path.endswith("/payment-reports")
)


# The scope tests' gateway and key file (a key per scope, and every scope but one), a pair
# of this module's own.
pair = test_scopes.pair


def concrete(template: str) -> str:
    return template.format(**SAMPLE)


def same_answer(edge: httpx.Response, regular: httpx.Response) -> None:
    assert edge.status_code == regular.status_code
    assert edge.content == regular.content
    for name in ("content-type", "content-length", "www-authenticate", "retry-after"):
        assert edge.headers.get(name) == regular.headers.get(name), name
    assert edge.headers["x-request-id"]


def answered_at_edge(
    gw: Gateway,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes | None = None,
    *,
    chunked: bool = False,
) -> bool:
    """Whether the edge itself answers the request."""
    edge = gw.app.edge
    assert edge is not None
    raw = [(name.lower().encode(), value.encode()) for name, value in headers.items()]
    scope = {"type": "http", "method": method, "path": path, "headers": raw, "query_string": b""}
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body or b"", "more_body": False}

    if chunked:
        raw.append((b"transfer-encoding", b"chunked"))
    elif body is not None or method in {"POST", "PUT"}:  # as clients send a body-less write
        raw.append((b"content-length", str(len(body or b"")).encode()))
    return bool(asyncio.run(edge.serve(scope, send, receive if body is not None else None)))


def scope_denials(gw: Gateway, made: Keys) -> int:
    events = audit(gw, made)
    return sum(e["details"]["count"] for e in events if e["event"] == "scope_denied")


@pytest.mark.parametrize("path", ["/api/v1/no-such-route", "/wp-login.php", "/api/v1/tickets/1/"])
def test_an_unknown_path_is_the_regular_404(pair: Any, path: str) -> None:
    _, gw, _ = pair
    path = path + "x" if path.endswith("/") else path  # a known prefix, an unknown path
    edge = gw.client.get(path)
    same_answer(edge, gw.client.get(path, headers=BROWSER))
    assert edge.status_code == 404 and edge.json()["action"] == "error"
    assert answered_at_edge(gw, "GET", path, {})


@pytest.mark.parametrize(("method", "template"), JSON_ROUTES)
@pytest.mark.parametrize(
    "body",
    [
        *(b'{"document": "123', b"[1, 2", b"\xff\xfe{}", b"{} {}", b"nul", b"[" * 60_000),
        # Read as json.loads reads bytes: UTF-16 (with a byte-order mark, or none), and
        # UTF-8 that is not.
        *('{"document": "1'.encode("utf-16"), '{"document": 1'.encode("utf-16-le")),
        b'{"document": "\xff"}',
    ],
    ids=lambda body: repr(body[:20]),
)
def test_a_malformed_json_body_is_the_regular_422(
    pair: Any, method: str, template: str, body: bytes
) -> None:
    """Before any credential is read, as FastAPI parses the body first: with a token, with a
    key without the scope, and with none, the same 422."""
    _, gw, made = pair
    path = concrete(template)
    for credential in (gw.auth, {"X-API-Key": made.only[keys.PLANS_READ]}, {}):
        headers = {"Content-Type": "application/json", **credential}
        edge = gw.client.request(method, path, headers=headers, content=body)
        regular = gw.client.request(method, path, headers={**headers, **BROWSER}, content=body)
        same_answer(edge, regular)
        assert edge.status_code == 422
        assert edge.json()["action"] == "validation_error"
        json_headers = {"content-type": "application/json", **credential}
        assert answered_at_edge(gw, method, path, json_headers, body)


def test_a_body_of_no_stated_length_is_left_to_the_regular_stack(pair: Any) -> None:
    """A chunked body is not read at the edge: FastAPI parses it before the credential, so
    a malformed one is the 422 even without a credential, never the edge's 401."""
    _, gw, _ = pair

    def chunks() -> Iterator[bytes]:
        yield b'{"document": '
        yield b'"123'

    headers = {"Content-Type": "application/json"}
    edge = gw.client.post("/api/v1/clients/resolve", headers=headers, content=chunks())
    assert edge.status_code == 422
    assert edge.json()["meta"]["errors"][0]["field"].startswith("body")
    body = b'{"document": "123'
    assert not answered_at_edge(gw, "POST", "/api/v1/clients/resolve", headers, body, chunked=True)


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-32-le"])
def test_a_sound_body_reaches_the_route_whole(pair: Any, encoding: str) -> None:
    """The body the edge read is handed on as it came: the route reads all of it, in any
    encoding json.loads reads."""
    _, gw, _ = pair
    text = '{"document": "12345678", "plan_name": "x", "plan_price": 1, "address": "y"}'
    body = text.encode(encoding)
    headers = {**gw.auth, "Content-Type": "application/json"}
    edge = gw.client.post("/api/v1/clients/resolve", headers=headers, content=body)
    regular = gw.client.post(
        "/api/v1/clients/resolve", headers={**headers, **BROWSER}, content=body
    )
    assert edge.status_code == regular.status_code
    assert edge.json()["action"] == regular.json()["action"]
    assert edge.status_code != 422 or edge.json()["meta"]["errors"][0]["field"] != "body"


@pytest.mark.parametrize(("method", "template"), sorted(EXPECTED))
@pytest.mark.parametrize(
    "credential",
    [{}, {"Authorization": "Bearer not-a-token"}, {"X-API-Key": "igw_" + "A" * 43}],
    ids=["none", "bad token", "unknown key"],
)
def test_a_refused_credential_is_the_regular_401(
    pair: Any, method: str, template: str, credential: dict[str, str]
) -> None:
    _, gw, _ = pair
    path = concrete(template)
    edge = gw.client.request(method, path, headers=credential)
    same_answer(edge, gw.client.request(method, path, headers={**credential, **BROWSER}))
    assert edge.status_code == 401
    assert edge.json() == {"detail": "Could not validate credentials."}
    assert answered_at_edge(gw, method, path, credential)


@pytest.mark.parametrize(("method", "template"), sorted(EXPECTED))
def test_a_key_without_the_scope_is_the_regular_403_counted_alike(
    pair: Any, method: str, template: str
) -> None:
    _, gw, made = pair
    path = concrete(template)
    required = EXPECTED[(method, template)]
    headers = {"X-API-Key": made.all_but[required], "X-End-User-Id": "chat-7"}
    before = scope_denials(gw, made)
    edge = gw.client.request(method, path, headers=headers)
    after_edge = scope_denials(gw, made)
    regular = gw.client.request(method, path, headers={**headers, **BROWSER})
    same_answer(edge, regular)
    assert edge.status_code == 403
    assert edge.json()["action"] == "insufficient_scope"
    assert edge.json()["data"] == {"required": required}
    # Each refusal counted once, whichever layer gave it.
    assert after_edge == before + 1
    assert scope_denials(gw, made) == after_edge + 1
    assert answered_at_edge(gw, method, path, headers)


def test_the_edge_leaves_what_it_is_not_sure_of(pair: Any, tmp_path: Path) -> None:
    """A browser's request, a bad end user, a credential that passes, a wrong method: the
    regular stack answers them."""
    _, gw, made = pair
    lookup = "/api/v1/clients/search?q=rosa"
    reader = {"X-API-Key": made.only[keys.CLIENTS_READ]}
    planner = {"X-API-Key": made.only[keys.PLANS_READ]}
    assert not answered_at_edge(gw, "GET", "/api/v1/clients/search", {**planner, **BROWSER})
    assert not answered_at_edge(gw, "GET", "/api/v1/clients/search", reader)
    assert not answered_at_edge(gw, "GET", "/api/v1/clients/search", gw.auth)
    assert not answered_at_edge(gw, "DELETE", "/api/v1/clients/search", {})
    assert not answered_at_edge(
        gw, "GET", "/api/v1/clients/search", {**planner, "X-End-User-Id": "tab\there"}
    )
    bad_end_user = gw.client.get(lookup, headers={**planner, "X-End-User-Id": "tab\there"})
    assert bad_end_user.status_code == 422  # the end user is read before the scope
    assert gw.client.delete(lookup).status_code == 405


def test_the_edge_answers_in_the_deployments_language(password_hash: str, tmp_path: Path) -> None:
    """MESSAGES_LANGUAGE=en: the edge's 404, 422 and 403 say what the regular stack says."""
    made = Keys(tmp_path / "keys.json")
    with contextlib.ExitStack() as stack:
        sim = _start_simulator(stack)
        gw = _start_gateway(
            stack, password_hash, sim.url, API_KEYS_FILE=str(made.path), MESSAGES_LANGUAGE="en"
        )
        planner = {"X-API-Key": made.only[keys.PLANS_READ]}
        cases = [
            ("GET", "/api/v1/no-such-route", {}, None),
            ("GET", "/api/v1/clients/search", planner, None),
            ("GET", "/api/v1/clients/by-document/12345678", planner, None),  # the lookup door
            ("POST", "/api/v1/tickets", {"Content-Type": "application/json"}, b"{"),
        ]
        for method, path, headers, body in cases:
            edge = gw.client.request(method, path, headers=headers, content=body)
            regular = gw.client.request(method, path, headers={**headers, **BROWSER}, content=body)
            same_answer(edge, regular)
            assert edge.status_code in {403, 404, 422}
        assert gw.client.get("/api/v1/no-such-route").json()["message"] == "Not found"


def test_a_refusal_at_the_edge_is_audited_with_its_request_id(
    password_hash: str, tmp_path: Path
) -> None:
    """The 401 and the 403 of a lookup (the lookup door gives both) and of another route
    (the caller's door): each event names the request that was refused, as the regular
    check's does (a gateway of its own: an event is its group's first refusal of the
    minute)."""
    made = Keys(tmp_path / "keys.json")
    planner = {"X-API-Key": made.only[keys.PLANS_READ]}
    with contextlib.ExitStack() as stack:
        sim = _start_simulator(stack)
        gw = _start_gateway(stack, password_hash, sim.url, API_KEYS_FILE=str(made.path))
        cases = {
            "lookup-401": ("/api/v1/clients/by-document/12345678", {"Authorization": "Bearer x"}),
            "lookup-403": ("/api/v1/clients/by-document/12345678", planner),
            "search-403": (
                "/api/v1/clients/search?q=rosa",
                {"X-API-Key": made.only[keys.TICKETS_WRITE]},
            ),
        }
        for request_id, (path, headers) in cases.items():
            refused = gw.client.get(path, headers={**headers, "X-Request-ID": request_id})
            assert refused.status_code in {401, 403}
            assert refused.headers["x-request-id"] == request_id
        events = {(e["event"], e["caller"]): e for e in audit(gw, made)}
        assert events[("unauthorized", None)]["request_id"] == "lookup-401"
        assert events[("scope_denied", "only-plans-read")]["request_id"] == "lookup-403"
        assert events[("scope_denied", "only-tickets-write")]["request_id"] == "search-403"


class FailingDoor:
    """A door with a fault (a bug, a part it reads gone wrong)."""

    async def answer(self, request: Any, route: Any) -> None:
        raise RuntimeError("a door's fault")


def test_a_door_that_fails_lets_the_regular_stack_answer(
    pair: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A door that raises is a door that declined, logged without the document: the request
    goes on, whole, to the regular stack (not the server's bare 500); what no door decides
    (an unknown path) is still the edge's."""
    _, gw, _ = pair
    passed: list[tuple[str, bytes]] = []

    async def regular(scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        passed.append((scope["path"], message.get("body", b"")))
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    edge = Edge(
        regular,
        routes=gw.app.state.route_table,
        first=[FailingDoor()],
        doors=[FailingDoor()],
        max_body_bytes=gw.settings.MAX_BODY_BYTES,
    )
    lookup = "/api/v1/clients/by-document/12345678"
    sound = b'{"document": "12345678"}'

    async def scenario() -> list[int]:
        transport = httpx.ASGITransport(app=edge)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return [
                (await client.get(lookup)).status_code,
                (await client.post("/api/v1/clients/resolve", content=sound)).status_code,
                (await client.get("/api/v1/no-such-route")).status_code,
            ]

    with caplog.at_level(logging.ERROR, logger="isp_gateway"):
        assert asyncio.run(scenario()) == [299, 299, 404]
    assert passed == [(lookup, b""), ("/api/v1/clients/resolve", sound)]
    failures = [r for r in caplog.records if "FailingDoor failed" in r.getMessage()]
    assert len(failures) == 5  # both doors on each of the two, the first on the 404
    assert all("12345678" not in r.getMessage() for r in failures)


@pytest.mark.parametrize(
    ("body", "pieces", "reads", "status"),
    [
        (b'{"document": "123', 1, 1, 422),
        (b'{"document": "1"}', 1, 2, 299),
        # In pieces, the malformed part last: read to the stated length, never judged before.
        (b'{"document": "123', 3, 3, 422),
        (b'{"document": "1"}', 3, 4, 299),
    ],
)
def test_a_body_is_whole_at_its_stated_length(
    pair: Any, body: bytes, pieces: int, reads: int, status: int
) -> None:
    """Granian hands a body over with more_body set, and its end in a message of its own: a
    malformed body is answered once its stated length is here (its end is not waited for),
    and a sound one reaches the route whole, its end read by the route as the server gave
    it."""
    _, gw, _ = pair
    read: list[Any] = []
    passed: list[Any] = []
    sent: list[Any] = []
    size = -(-len(body) // pieces)
    chunks = [body[i : i + size] for i in range(0, len(body), size)]

    async def receive() -> dict[str, Any]:
        read.append(body)
        if len(read) <= len(chunks):
            return {"type": "http.request", "body": chunks[len(read) - 1], "more_body": True}
        return {"type": "http.request", "body": b"", "more_body": False}

    async def regular(scope: Any, receive: Any, send: Any) -> None:
        while not passed or passed[-1]["more_body"]:
            passed.append(await receive())
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def send(message: Any) -> None:
        sent.append(message)

    edge = Edge(regular, routes=gw.app.state.route_table, first=[], doors=[], max_body_bytes=99)
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    scope = {"type": "http", "method": "POST", "path": "/api/v1/clients/resolve"}
    asyncio.run(edge({**scope, "headers": headers, "query_string": b""}, receive, send))
    assert sent[0]["status"] == status
    assert len(read) == reads
    assert b"".join(m["body"] for m in passed) == (body if status == 299 else b"")


def test_a_key_rotating_end_users_is_counted_each_time_and_kept_bounded(pair: Any) -> None:
    """A hostile caller loops a refused scope with a new X-End-User-Id each time: every
    refusal is counted in the audit, and what the edge keeps made for the audit stays
    bounded (the caller's own values never grow it without end)."""
    _, gw, made = pair
    path = "/api/v1/clients/by-document/12345678"
    key = made.only[keys.PLANS_READ]
    before = scope_denials(gw, made)
    loops = 1_100
    for n in range(loops):
        headers = {"X-API-Key": key, "X-End-User-Id": f"rotating-{n}"}
        assert answered_at_edge(gw, "GET", path, headers)
    assert scope_denials(gw, made) == before + loops
    edge = gw.app.edge
    assert edge is not None
    denials = {id(door.denials): door.denials for door in [*edge.first, *edge.doors]}
    assert all(len(d._callers) <= 1024 for d in denials.values())
