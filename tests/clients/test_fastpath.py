"""The lookup fast path: same answers as the regular routes, and only in the sure case."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from isp_gateway.auth.tokens import issue_token
from isp_gateway.web.edge import Edge
from tests.clients.conftest import StartPair, calls, lookup_edge
from tests.conftest import USERNAME
from tests.support import wait_for_fresh_window, wait_until


def refusal(response: httpx.Response) -> httpx.Response | None:
    return response if response.status_code != 200 else None


LOOKUPS = [
    "/api/v1/clients/by-document/12345678",
    "/api/v1/clients/by-phone/%2B573109876543",
    "/api/v1/clients/by-service-id/101",
]


def test_fast_answers_equal_the_regular_routes(start_pair: StartPair) -> None:
    sim, gw = start_pair()
    for path in LOOKUPS:
        # A token never seen by this process goes through the regular route and its full
        # verification; the same token next time is eligible for the fast path.
        token = issue_token(gw.settings, USERNAME, now=datetime.now(UTC) - timedelta(seconds=1))
        headers = {"Authorization": f"Bearer {token}"}
        regular = gw.client.get(path, headers=headers)
        fast = gw.client.get(path, headers=headers)
        assert regular.status_code == fast.status_code == 200
        assert fast.content == regular.content
        assert fast.headers["content-type"] == regular.headers["content-type"]
        assert fast.json()["data"]["service_id"] == 101
    assert calls(sim) == 0


def test_expired_token_is_refused_even_after_use(start_pair: StartPair) -> None:
    _, gw = start_pair()
    now = datetime.now(UTC)
    # Valid for 4-5 s more (lifetime 1 min, issued 55 s ago; `exp` is cut to whole
    # seconds): long enough for the first request even from a stalled test process.
    token = issue_token(
        gw.settings.model_copy(update={"JWT_ACCESS_TOKEN_EXPIRE_MINUTES": 1}),
        USERNAME,
        now=now - timedelta(seconds=55),
    )
    headers = {"Authorization": f"Bearer {token}"}
    assert gw.client.get(LOOKUPS[0], headers=headers).status_code == 200
    refused = wait_until(  # it expires within five seconds (the wait allows 10), then is refused
        lambda: refusal(gw.client.get(LOOKUPS[0], headers=headers)), interval=0.05
    )
    assert refused.status_code == 401
    assert refused.json() == {"detail": "Could not validate credentials."}


def test_tampered_token_is_not_a_cache_hit(start_pair: StartPair) -> None:
    _, gw = start_pair()
    assert gw.get(LOOKUPS[0]).status_code == 200  # gw.token is now verified and cached
    forged = gw.token[:-2] + ("AA" if not gw.token.endswith("AA") else "BB")
    refused = gw.client.get(LOOKUPS[0], headers={"Authorization": f"Bearer {forged}"})
    assert refused.status_code == 401


def test_only_sure_hits_skip_the_regular_app(start_pair: StartPair) -> None:
    _, gw = start_pair()
    assert gw.get(LOOKUPS[0]).status_code == 200  # verify and cache gw.token
    passed: list[str] = []

    async def regular(scope: Any, receive: Any, send: Any) -> None:
        passed.append(scope["path"])
        await send({"type": "http.response.start", "status": 299, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    fast = lookup_edge(regular, gw)
    transport = httpx.ASGITransport(app=fast)

    async def fetch(path: str, token: str | None) -> int:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return (await client.get(path, headers=headers)).status_code

    async def scenario() -> dict[str, int]:
        unseen = issue_token(gw.settings, USERNAME, now=datetime.now(UTC) - timedelta(seconds=5))
        return {
            "hit": await fetch(LOOKUPS[0], gw.token),
            "phone hit": await fetch(LOOKUPS[1], gw.token),
            "no token": await fetch(LOOKUPS[0], None),
            "unverified token": await fetch(LOOKUPS[0], unseen),
            "miss": await fetch("/api/v1/clients/by-document/424242", gw.token),
            "bad document": await fetch("/api/v1/clients/by-document/12.345", gw.token),
            "other route": await fetch("/api/v1/clients/search?q=rosa", gw.token),
        }

    status = asyncio.run(scenario())
    # A token not seen before is verified at the edge; a missing one refused there
    # (CALLERS.md 6 "The cost of refusing").
    assert status["hit"] == status["phone hit"] == status["unverified token"] == 200
    assert status["no token"] == 401
    for case in ("miss", "bad document", "other route"):
        assert status[case] == 299, case
    assert len(passed) == 3


def test_access_log_masks_documents_and_phones(
    start_pair: StartPair, caplog: pytest.LogCaptureFixture
) -> None:
    _, gw = start_pair()
    caplog.set_level(logging.INFO, logger="isp_gateway.access")
    for path in LOOKUPS:
        assert gw.get(path).status_code == 200
    assert gw.get("/api/v1/clients/by-document/424242").status_code == 404

    # The access log writes its lines in batches, a fraction of a second later.
    def four_lines() -> list[str] | None:
        records = [r.getMessage() for r in caplog.records if r.name == "isp_gateway.access"]
        lines = "\n".join(records).splitlines()
        return lines if len(lines) >= 4 else None

    lines = wait_until(four_lines, interval=0.05, message="the access log's lines")
    assert len(lines) == 4
    text = "\n".join(lines)
    for secret in ("12345678", "3109876543", "424242"):
        assert secret not in text
    assert "/api/v1/clients/by-document/*** 200" in text
    assert "/api/v1/clients/by-service-id/101 200" in text


@pytest.mark.parametrize("first", ["Bearer not-a-token", "Basic Ym90OnB3"])
def test_only_the_first_authorization_header_counts(start_pair: StartPair, first: str) -> None:
    _, gw = start_pair()
    assert gw.get(LOOKUPS[0]).status_code == 200  # gw.token is verified and cached
    headers = httpx.Headers([("Authorization", first), ("Authorization", f"Bearer {gw.token}")])
    for path in (LOOKUPS[0], "/api/v1/clients/by-document/424242"):  # a hit, then a miss
        response = gw.client.get(path, headers=headers)
        assert response.status_code == 401, path


def test_edge_hits_carry_the_request_id(start_pair: StartPair) -> None:
    _, gw = start_pair()
    assert gw.get(LOOKUPS[0]).status_code == 200  # gw.token is verified and cached
    echoed = gw.get(LOOKUPS[0], headers={"X-Request-ID": "bot-turn.42"})
    assert echoed.status_code == 200
    assert echoed.headers["x-request-id"] == "bot-turn.42"
    # An unsafe incoming id is replaced, and fresh ids never repeat.
    replaced = gw.get(LOOKUPS[0], headers={"X-Request-ID": "a b<script>"})
    ids = {replaced.headers["x-request-id"], gw.get(LOOKUPS[1]).headers["x-request-id"]}
    ids.add(gw.get(LOOKUPS[2]).headers["x-request-id"])
    assert len(ids) == 3
    assert all(i and "<" not in i and " " not in i for i in ids)


def test_the_edge_answers_only_sure_hits(start_pair: StartPair) -> None:
    """The edge in front of the app: it answers a sure hit itself and leaves every other
    request to the full stack, having sent nothing."""
    _, gw = start_pair()
    assert gw.get(LOOKUPS[0]).status_code == 200  # verify and cache gw.token
    edge = gw.app.edge
    assert edge is not None
    unseen = issue_token(gw.settings, USERNAME, now=datetime.now(UTC) - timedelta(seconds=5))

    async def serve(path: str, token: str | None, **extra: str) -> tuple[bool, list[Any]]:
        headers = [(b"host", b"t")]
        if token:
            headers.append((b"authorization", f"Bearer {token}".encode()))
        headers += [(k.encode(), v.encode()) for k, v in extra.items()]
        scope = {"type": "http", "method": "GET", "path": path, "headers": headers}
        sent: list[Any] = []

        async def send(message: Any) -> None:
            sent.append(message)

        return await edge.serve(scope, send), sent

    async def scenario() -> dict[str, tuple[bool, list[Any]]]:
        return {
            "hit": await serve(LOOKUPS[0], gw.token),
            "service id hit": await serve(LOOKUPS[2], gw.token),
            "no token": await serve(LOOKUPS[0], None),
            "unverified token": await serve(LOOKUPS[0], unseen),
            "browser": await serve(LOOKUPS[0], gw.token, origin="https://x.example"),
            "miss": await serve("/api/v1/clients/by-document/424242", gw.token),
            "bad phone": await serve("/api/v1/clients/by-phone/12", gw.token),
            "other route": await serve("/api/v1/clients/search", gw.token),
        }

    served = asyncio.run(scenario())
    # A token not seen before is verified at the edge; a missing one refused there
    # (CALLERS.md 6 "The cost of refusing").
    for case, status in (
        ("hit", 200),
        ("service id hit", 200),
        ("unverified token", 200),
        ("no token", 401),
    ):
        answered, sent = served[case]
        assert answered, case
        assert sent[0]["status"] == status
        assert dict(sent[0]["headers"])[b"x-request-id"]
    for case in ("browser", "miss", "bad phone", "other route"):
        assert served[case] == (False, []), case


def test_with_a_rate_limit_every_lookup_is_counted(start_pair: StartPair) -> None:
    """A rate limit must see warm hits too: then the fast path sits behind the limiter."""
    _, gw = start_pair(RATE_LIMIT_PER_MINUTE=4)
    assert gw.app.edge is None
    wait_for_fresh_window(60)
    statuses = [gw.get(LOOKUPS[0]).status_code for _ in range(6)]
    assert statuses == [200, 200, 200, 200, 429, 429]


# X-End-User-Id (CALLERS.md 1): the edge answers a valid one, never a bad one.
BAD_END_USERS: list[str | bytes] = ["x" * 129, "", "tab\there", b"caf\xc3\xa9", b"\xff"]


def test_the_lookup_edge_lets_no_bad_end_user_through(start_pair: StartPair) -> None:
    _, gw = start_pair()
    path = "/api/v1/clients/by-document/12345678"
    assert gw.get(path).status_code == 200  # the token is verified: the edge may answer
    good = gw.get(path, headers={"X-End-User-Id": "chat-42"})
    assert good.status_code == 200 and good.json()["data"]["service_id"] == 101
    for value in BAD_END_USERS:
        response = gw.get(path, headers={"X-End-User-Id": value})  # type: ignore[dict-item]
        assert response.status_code == 422, value
        assert response.json()["action"] == "validation_error"


def test_one_edge_placed_by_the_rate_limit_setting(start_pair: StartPair) -> None:
    """The same `Edge` in front of the whole app (no rate limit) or behind the limiter:
    either way a warm hit is the regular route's bytes, with the caller's request id."""
    for overrides in ({}, {"RATE_LIMIT_PER_MINUTE": 1000}):
        sim, gw = start_pair(**overrides)
        behind = [m.cls for m in gw.app.user_middleware].count(Edge)
        in_front = gw.app.edge is not None
        assert (in_front, behind) == ((False, 1) if overrides else (True, 0)), overrides
        regular = gw.get(LOOKUPS[0])  # verifies and caches the token
        before = calls(sim)
        for _ in range(3):
            fast = gw.get(LOOKUPS[0], headers={"X-Request-ID": "turn-7"})
            assert fast.content == regular.content, overrides
            assert fast.headers["x-request-id"] == "turn-7"
        assert calls(sim) == before
