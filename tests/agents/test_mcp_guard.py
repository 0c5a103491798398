"""Every way around the verification guard, tried as a talked-into-it agent would, and a
search of everything an agent learns before verification for the customer's data."""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from isp_gateway.kit.callers import Caller
from isp_gateway.kit.verifications import VerificationRequired, Verifications
from isp_gateway.store import MemoryStore
from tests.agents.conftest import Result, call, customer, mcp_session, pick_customer, statement
from tests.conftest import Gateway, Simulator, StartGateway
from tests.support import wait_until_async

REDIS_DB = 7

VERIFIED_TOOLS: dict[str, dict[str, Any]] = {
    "customer_summary": {},
    "customer_account": {},
    "diagnose_connection": {"wait": 0},
    "customer_tickets": {},
    "open_ticket": {"subject": "No Tiene Internet", "description": "Sin servicio."},
    "update_contact": {"phone": "3001112233"},
}


def two_customers(gw: Gateway) -> tuple[dict[str, Any], dict[str, Any]]:
    first = pick_customer(gw)
    rows = gw.get("/api/v1/clients/").json()["data"]
    other = next(
        r for r in rows if r["service_id"] != first["service_id"] and r["name"] and r["address"]
    )
    return first, customer(gw, other["service_id"])


async def verified_id(session: Any, client: dict[str, Any]) -> str:
    result = await call(
        session, "verify_customer", service_id=client["service_id"], **statement(client)
    )
    assert result.data.get("verified") is True, result.texts
    vid: str = result.data["verification_id"]
    return vid


def refused(result: Result) -> bool:
    return result.is_error and result.data.get("error") == "verification_required"


def assert_refused_everywhere(results: dict[str, Result]) -> None:
    for tool, result in results.items():
        assert refused(result), (tool, result.texts)
        # The next step is the agent's hint; the sentence is the customer's (issue 28.7).
        assert "verify_customer" in (result.hint or "")
        assert "verify_customer" not in result.sentence


async def every_verified_tool(session: Any, verification_id: str | None) -> dict[str, Result]:
    results = {}
    for tool, extra in VERIFIED_TOOLS.items():
        args = dict(extra)
        if verification_id is not None:
            args["verification_id"] = verification_id
        results[tool] = await call(session, tool, **args)
    return results


@pytest.mark.anyio
async def test_no_id_and_forged_ids_are_refused(gateway: Gateway) -> None:
    client = pick_customer(gateway)
    async with mcp_session(gateway) as session:
        await verified_id(session, client)  # a real one exists, for this very service
        assert_refused_everywhere(await every_verified_tool(session, None))
        for forged in (
            "",
            "ver_" + secrets.token_urlsafe(32),
            str(client["service_id"]),
            f"ver_{client['service_id']}",
            "ver_" + "A" * 190,
        ):
            assert_refused_everywhere(await every_verified_tool(session, forged))
    # Nothing reached the customer: no ticket, the phone unchanged.
    assert gateway.get(f"/api/v1/clients/{client['service_id']}/tickets").json()["data"] == []
    assert customer(gateway, client["service_id"])["phone"] == client["phone"]


@pytest.mark.anyio
async def test_an_id_acts_only_on_its_own_service(gateway: Gateway) -> None:
    """Verified for A, the agent is asked about B: there is no argument naming B, and A's
    id answers about A only."""
    first, second = two_customers(gateway)
    async with mcp_session(gateway) as session:
        vid = await verified_id(session, first)
        for tool, extra in VERIFIED_TOOLS.items():
            smuggled = await call(
                session, tool, verification_id=vid, service_id=second["service_id"], **extra
            )
            assert smuggled.is_error, tool
            assert smuggled.data["error"] == "invalid_arguments"
            assert second["name"] not in smuggled.everything()
        summary = await call(session, "customer_summary", verification_id=vid)
        assert summary.data["service_id"] == first["service_id"]
        # B's verification fails: it gives no id, and A's id still names A.
        wrong = await call(
            session,
            "verify_customer",
            service_id=second["service_id"],
            **statement(first),
        )
        assert wrong.data == {"verified": False, "attempts_left": 4}
        summary = await call(session, "customer_summary", verification_id=vid)
        assert summary.data["service_id"] == first["service_id"]


@pytest.mark.anyio
async def test_another_end_users_id_is_refused(gateway: Gateway) -> None:
    client = pick_customer(gateway)
    async with mcp_session(gateway, end_user="chat-alice") as alice:
        vid = await verified_id(alice, client)
        assert not (await call(alice, "customer_summary", verification_id=vid)).is_error
    async with mcp_session(gateway, end_user="chat-mallory") as mallory:
        assert_refused_everywhere(await every_verified_tool(mallory, vid))
    # Without the header the end user is the caller itself: not alice either.
    async with mcp_session(gateway) as bare:
        assert_refused_everywhere(await every_verified_tool(bare, vid))
    async with mcp_session(gateway, end_user="chat-alice") as alice_again:
        assert not (await call(alice_again, "customer_summary", verification_id=vid)).is_error


@pytest.mark.anyio
async def test_expired_id_is_refused(simulator: Simulator, start_gateway: StartGateway) -> None:
    # 3 s: the first summary must come within the TTL, a margin a stalled test process keeps.
    gw = start_gateway(simulator.url, VERIFICATION_TTL_SECONDS=3)
    client = pick_customer(gw)
    async with mcp_session(gw) as session:
        vid = await verified_id(session, client)
        assert not (await call(session, "customer_summary", verification_id=vid)).is_error

        async def expired() -> bool:  # within its TTL (3 s) it still works
            return bool((await call(session, "customer_summary", verification_id=vid)).is_error)

        await wait_until_async(expired, interval=0.05, message="the verification to expire")
        assert_refused_everywhere(await every_verified_tool(session, vid))


@pytest.mark.anyio
async def test_another_callers_id_is_refused() -> None:
    """The binding holds for the caller as well as the end user (API keys are callers too):
    the same end user under another credential is refused."""
    verifications = Verifications(MemoryStore(), ttl_seconds=60)
    bot = Caller("jwt:bot", "chat-1", "127.0.0.1")
    issued = await verifications.issue(1002, bot)
    assert await verifications.service_of(issued.verification_id, bot) == 1002
    assert issued.verification_id.startswith("ver_") and issued.expires_in == 60
    for other in (
        Caller("web-portal", "chat-1", "127.0.0.1"),
        Caller("jwt:bot", "chat-2", "127.0.0.1"),
        Caller("jwt:other", "jwt:bot", "127.0.0.1"),
    ):
        with pytest.raises(VerificationRequired):
            await verifications.service_of(issued.verification_id, other)
    # Another address of the same caller and end user is the same conversation.
    moved = Caller("jwt:bot", "chat-1", "10.0.0.9")
    assert await verifications.service_of(issued.verification_id, moved) == 1002


@pytest.mark.anyio
async def test_failed_verifications_count_down_then_lock(gateway: Gateway) -> None:
    client = pick_customer(gateway)
    wrong = {**statement(client), "name": "Persona Equivocada"}
    async with mcp_session(gateway) as session:
        left = []
        for _ in range(5):
            result = await call(
                session, "verify_customer", service_id=client["service_id"], **wrong
            )
            assert not result.is_error
            assert "verification_id" not in result.data
            left.append(result.data["attempts_left"])
        locked = await call(
            session, "verify_customer", service_id=client["service_id"], **statement(client)
        )
    assert left == [4, 3, 2, 1, 0]
    assert locked.is_error
    assert locked.data["error"] == "client_verification_locked"
    assert locked.data["retry_after"] > 0


def _secrets_of(client: dict[str, Any]) -> list[str]:
    values = [
        client["name"],
        client["address"],
        client["internet_plan_name"],
        client["document"],
        *client["phone"].split(","),
        f"{client['internet_plan_price']:.0f}",
        f"{client['internet_plan_price']:,.0f}",
    ]
    return [v.strip().lower() for v in values if v and v.strip()]


@pytest.mark.anyio
async def test_nothing_before_verification_names_the_customer(gateway: Gateway) -> None:
    client = pick_customer(gateway)
    sid = client["service_id"]
    phone = client["phone"].split(",")[0]
    half = {"name": client["name"], "address": client["address"]}
    async with mcp_session(gateway) as session:
        results = [
            await call(session, "find_customer", phone=phone),
            await call(session, "find_customer", document=client["document"]),
            await call(session, "find_customer", service_id=sid),
            await call(session, "find_customer", phone=phone, document=client["document"]),
            await call(session, "find_customer"),
            await call(session, "find_customer", phone="12"),
            await call(session, "find_customer", phone="3999999999"),
            await call(session, "find_customer", document="no-such-doc!"),
            await call(session, "find_customer", service_id=99_999_999),
            await call(session, "verify_customer", service_id=sid, **half),
            await call(
                session, "verify_customer", service_id=sid, **half, plan_name="Plan Inexistente"
            ),
            await call(
                session,
                "verify_customer",
                service_id=sid,
                name="Nadie",
                address="Ninguna parte",
                plan_name=client["internet_plan_name"],
            ),
            await call(session, "verify_customer", service_id=99_999_999, **statement(client)),
            await call(session, "verify_customer", service_id=sid, **half, plan_price=-1),
            *(await every_verified_tool(session, None)).values(),
            *(await every_verified_tool(session, "ver_forged")).values(),
        ]
        # Exhaust the verify attempts: the lock's answer too.
        for _ in range(5):
            results.append(
                await call(
                    session, "verify_customer", service_id=sid, **half, plan_name="Otro Plan"
                )
            )
        tools = (await session.list_tools()).tools
    assert any(r.is_error for r in results) and any(not r.is_error for r in results)
    assert results[-1].data["error"] == "client_verification_locked"
    texts = [r.everything().lower() for r in results]
    texts += [json.dumps(t.model_dump(mode="json")).lower() for t in tools]
    for secret in _secrets_of(client):
        for text in texts:
            assert secret not in text, (secret, text)


@pytest.fixture
def shared_redis(redis_url: Callable[[int], str]) -> Iterator[str]:
    url = redis_url(REDIS_DB)
    client = redis.Redis.from_url(url)
    client.ping()
    try:
        yield url
    finally:
        for pattern in ("ispgw:*verification:*", "ispgw:*cache:*", "ispgw:*throttle:*"):
            for key in client.scan_iter(match=pattern):
                with contextlib.suppress(redis.RedisError):
                    client.delete(key)
        client.close()


@pytest.mark.anyio
async def test_verification_shared_by_two_gateways(
    simulator: Simulator, start_gateway: StartGateway, shared_redis: str
) -> None:
    """Stateless /mcp on two workers: an id issued by one is honoured by the other, with
    the same bindings."""
    one = start_gateway(simulator.url, REDIS_URL=shared_redis)
    two = start_gateway(simulator.url, REDIS_URL=shared_redis)
    client = pick_customer(one)
    async with mcp_session(one, end_user="chat-9") as first:
        vid = await verified_id(first, client)
    async with mcp_session(two, end_user="chat-9") as second:
        summary = await call(second, "customer_summary", verification_id=vid)
        assert not summary.is_error, summary.texts
        assert summary.data["service_id"] == client["service_id"]
    async with mcp_session(two, end_user="chat-10") as stranger:
        assert refused(await call(stranger, "customer_summary", verification_id=vid))
