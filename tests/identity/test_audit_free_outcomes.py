"""CALLERS.md 6, "The audit cannot be flushed", for what a low-scope key gets at no cost
without being refused: a verify of a service that does not exist (REST and MCP), a resolve
that names two customers, a verify it passes again, a ping that joins a running task, a
diagnose answered from what the gateway holds. Each was kept one by one, free and with no
limit, and a flood of it evicted the identity and network events that really happened. On
`serve --workers 2` with Redis: a flood of each, more than AUDIT_MAX_EVENTS, leaves the
earlier event in `GET /api/v1/audit`, and the flood is there as counted events
(`details.count`), one per caller, outcome, service and minute."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.agents.conftest import call, mcp_session_at
from tests.identity.conftest import Served, ServeWorkers, events
from tests.support import wait_until

REDIS_DB = 12
CAP = 100  # AUDIT_MAX_EVENTS' least value
THREADS = 8
ROUNDS = 30  # per thread: 240 requests of each kind, 2.4 times CAP

# Record 101 of the crafted data, as a bot verifies it; 102, as the flooding key knows it.
GOOD = {"name": "Juan Perez", "address": "Vereda el Rosal", "internet_plan_name": "plan 10mb"}
KNOWN = {
    "name": "Maria Jose Rodriguez",
    "address": "Barrio Los Pinos",
    "internet_plan_name": "plan 10mb",
}
# Facts two customers share (the data's twins, 105 and 106): 409 client_ambiguous.
TWINS = {"name": "Rosa Diaz", "address": "El Porvenir", "internet_plan_name": "plan 10mb"}
JUNK = {"name": "Ana Maria", "address": "El Rosal", "internet_plan_name": "x"}
# Services that do not exist: a few, so a loop over ids is tried too.
NOWHERE = [99_999_990 + n for n in range(4)]

Request = tuple[str, str, dict[str, Any], int]


def flood(served: Served, key: str, requests: list[Request]) -> None:
    """THREADS x ROUNDS of each of `requests` (method, path, JSON body, status it must
    answer) with `key`, on fresh connections (both workers take their share). `{nowhere}`
    in a path is one of NOWHERE, in turn."""

    def run(thread: int) -> list[tuple[str, int, int]]:
        answers = []
        # An end user a thread: a verify reserves its attempt before it is checked, and
        # eight at once on one end user would be refused as a guess in flight.
        headers = served.headers(key, f"user-{thread}")
        with httpx.Client(base_url=served.url, headers=headers, timeout=15) as http:
            for n in range(ROUNDS):
                for method, path, body, status in requests:
                    path = path.format(nowhere=NOWHERE[(thread + n) % len(NOWHERE)])
                    got = http.request(method, path, json=body).status_code
                    answers.append((path, got, status))
        return answers

    with ThreadPoolExecutor(THREADS) as pool:
        answers = [a for batch in pool.map(run, range(THREADS)) for a in batch]
    wrong = [(path, got) for path, got, status in answers if got != status]
    assert not wrong, wrong[:5]


def tally(found: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    """How many requests `found` stands for, by (event, outcome, service, counted?): a kept
    event is one, a counted one its `details.count`."""
    out: Counter[tuple[Any, ...]] = Counter()
    for e in found:
        counted = "count" in e["details"]
        key = (e["event"], e["outcome"], e["service_id"], counted)
        out[key] += e["details"]["count"] if counted else 1
    return out


def settled(
    served: Served, want: Callable[[Counter[tuple[Any, ...]]], bool], **params: Any
) -> list[dict[str, Any]]:
    """The events matching `params` once their tally satisfies `want` (each worker flushes
    its counts every second)."""
    found: list[dict[str, Any]] = []

    def ready() -> bool:
        nonlocal found
        found = events(served, **params)
        return want(tally(found))

    try:
        wait_until(ready, timeout=10, interval=0.2, message="the counts to be flushed")
    except Exception:
        raise AssertionError(tally(found)) from None
    return found


Tally = Counter[tuple[Any, ...]]

# What a key with clients:verify only floods the identity stream with, each at no cost and
# with no limit, and how the flood must be found in the audit (a tally of the key's verify
# and resolve events: `many` requests, kept ones stood for one each).
IDENTITY_FLOODS: dict[str, tuple[list[Request], Callable[[Tally, int], bool]]] = {
    # No such service: nothing compared, the identity counters given back. Counted with no
    # service (there is none), whatever the id; MCP's verify_customer adds CAP // 4.
    "nowhere": (
        [("POST", "/api/v1/clients/{nowhere}/verify", JUNK, 404)],
        lambda t, many: t == {("verify", "failed", None, True): many + CAP // 4},
    ),
    # Two customers: neither a failure nor a success. Counted.
    "ambiguous": (
        [("POST", "/api/v1/clients/resolve", TWINS, 409)],
        lambda t, many: t == {("resolve", "failed", None, True): many},
    ),
    # A customer the key knows, verified again and again: kept once a minute, counted after.
    "again": (
        [("POST", "/api/v1/clients/102/verify", KNOWN, 200)],
        lambda t, many: (
            set(t) == {("verify", "verified", 102, False), ("verify", "verified", 102, True)}
            and sum(t.values()) == many
        ),
    ),
}


@pytest.mark.parametrize("flooded", list(IDENTITY_FLOODS))
def test_free_identity_outcomes_cannot_flush_the_identity_stream(
    serve_workers: ServeWorkers, flooded: str
) -> None:
    served = serve_workers(keys={"guesser": ["clients:verify"]}, AUDIT_MAX_EVENTS=CAP)
    # The event that must stay: a bot verifies a customer.
    verified = served.post("/api/v1/clients/101/verify", json=GOOD, user="cust-1")
    assert verified.json()["action"] == "client_verified", verified.text
    started = time.time()
    requests, expected = IDENTITY_FLOODS[flooded]
    flood(served, "guesser", requests)

    async def agent() -> None:
        statement = {"name": "Ana Maria", "address": "Vereda El Rosal", "plan_name": "x"}
        async with mcp_session_at(served.url, served.keys["guesser"]) as session:
            for n in range(CAP // 4):
                result = await call(
                    session, "verify_customer", service_id=NOWHERE[n % 4], **statement
                )
                assert result.is_error

    if flooded == "nowhere":
        asyncio.run(agent())
    minutes = int(time.time() // 60) - int(started // 60) + 1
    many = THREADS * ROUNDS

    # The bot's verify is still there, by event and by service.
    kept = events(served, event="verify", service_id=101)
    assert [(e["outcome"], e["caller"], e["end_user"]) for e in kept] == [
        ("verified", "jwt:bot", "cust-1")
    ]
    # The flood, as a handful of events (one or two per minute) that add up to it.
    found = settled(
        served,
        lambda t: expected(t, many),
        caller="guesser",
        event="resolve" if flooded == "ambiguous" else "verify",
    )
    assert len(found) <= 2 * minutes
    reasons = {e["details"].get("reason") for e in found}
    assert reasons == {"nowhere": {"client_not_found"}, "ambiguous": {"ambiguous"}}.get(
        flooded, {None}
    )


# The same for a key with network:ping only, on the network stream: pings of 103 (the first
# starts its task, the others join it), then diagnoses: of 101 (joining the bot's task), of
# a suspended customer (from the cached state), of services that do not exist.
NETWORK_FLOODS: dict[str, list[Request]] = {
    "joins": [("POST", "/api/v1/103/ping/", {"pings": 4}, 200)],
    "diagnoses": [
        ("POST", "/api/v1/clients/101/diagnose?wait=0", {}, 200),
        ("POST", "/api/v1/clients/102/diagnose?wait=0", {}, 200),
        ("POST", "/api/v1/clients/{nowhere}/diagnose?wait=0", {}, 404),
    ],
}


@pytest.mark.parametrize(
    ("flooded", "policy"), [("joins", "spec"), ("joins", "strict"), ("diagnoses", "spec")]
)
def test_free_network_outcomes_cannot_flush_the_network_stream(
    serve_workers: ServeWorkers, flooded: str, policy: str
) -> None:
    # Strict: a ping needs no verification even so (diagnoses do: refused, counted already).
    served = serve_workers(
        keys={"pinger": ["network:ping"]},
        AUDIT_MAX_EVENTS=CAP,
        PING_COALESCE_SECONDS=600,
        IDENTITY_POLICY=policy,
    )
    # The events that must stay: a bot's diagnose of 101, which starts a ping task.
    headers = served.headers()
    if policy == "strict":
        check = served.post("/api/v1/clients/101/verify", json=GOOD)
        assert check.status_code == 200, check.text
        headers["X-Verification-Id"] = check.json()["data"]["verification_id"]
    path = "/api/v1/clients/101/diagnose"
    diagnosed = httpx.post(served.url + path, params={"wait": 0}, headers=headers, timeout=15)
    assert diagnosed.status_code == 200, diagnosed.text
    action = diagnosed.json()["action"]
    started = time.time()
    flood(served, "pinger", NETWORK_FLOODS[flooded])
    minutes = int(time.time() // 60) - int(started // 60) + 1
    many = THREADS * ROUNDS

    kept = events(served, event="diagnose", service_id=101, caller="jwt:bot")
    assert [(e["outcome"], "count" in e["details"]) for e in kept] == [(action, False)]
    assert ("ping", "ping_created", 101, False) in tally(events(served, caller="jwt:bot"))

    def complete(t: Tally) -> bool:
        if flooded == "joins":
            return t[("ping", "ping_created", 103, False)] == 1 and (
                t[("ping", "ping_created", 103, True)] == many - 1
            )
        return (
            sum(n for k, n in t.items() if k[:1] == ("diagnose",) and k[2] == 101) == many
            and t[("diagnose", "service_suspended", 102, True)] == many
            and t[("diagnose", "client_not_found", None, True)] == many
        )

    found = settled(served, complete, caller="pinger")
    # One task started for 103, kept; the joins counted, saying so (the diagnoses of 101
    # joined the bot's task). No diagnose of the key started a task: each was counted.
    joins = [e for e in found if e["event"] == "ping" and "count" in e["details"]]
    assert {(e["service_id"], e["details"]["joined"]) for e in joins} == {
        (103 if flooded == "joins" else 101, True)
    }
    assert all("count" in e["details"] for e in found if e["event"] == "diagnose")
    # A poll of 101's task by a diagnose may record its result, once (kept).
    assert len(found) <= (1 if flooded == "joins" else 5) * minutes + 2


def test_a_verified_agent_looping_one_read_cannot_flush_the_mcp_stream(
    serve_workers: ServeWorkers,
) -> None:
    # An agent with a verification of 102 reads it again and again: a read of a customer,
    # kept, but free to repeat; each was kept one by one and a loop of CAP + 20 pushed the
    # bot's reads of 101 out of the MCP stream.
    served = serve_workers(keys={"agent": ["clients:read", "clients:verify"]}, AUDIT_MAX_EVENTS=CAP)
    facts = {"name": "Juan Perez", "address": "Vereda el Rosal", "plan_name": "plan 10mb"}
    known = {**KNOWN, "plan_name": KNOWN["internet_plan_name"]}
    del known["internet_plan_name"]
    loops = CAP + 20

    async def conversations() -> float:
        async with mcp_session_at(served.url, served.token, end_user="cust-1") as bot:
            checked = await call(bot, "verify_customer", service_id=101, **facts)
            assert not checked.is_error, checked.texts
            vid = checked.data["verification_id"]
            assert not (await call(bot, "customer_summary", verification_id=vid)).is_error
        started = time.time()
        async with mcp_session_at(served.url, served.keys["agent"], end_user="x") as agent:
            checked = await call(agent, "verify_customer", service_id=102, **known)
            assert not checked.is_error, checked.texts
            vid = checked.data["verification_id"]
            for _ in range(loops):
                assert not (await call(agent, "customer_summary", verification_id=vid)).is_error
        return started

    started = asyncio.run(conversations())
    minutes = int(time.time() // 60) - int(started // 60) + 1
    kept = events(served, event="mcp_tool", service_id=101)
    assert sorted((e["details"]["tool"], "count" in e["details"]) for e in kept) == [
        ("customer_summary", False),
        ("verify_customer", False),
    ]
    # The loop: its first read of each minute kept, the rest counted; all of it there.
    found = settled(
        served,
        lambda t: t[("mcp_tool", "ok", 102, False)] + t[("mcp_tool", "ok", 102, True)] == loops + 1,
        caller="agent",
        event="mcp_tool",
    )
    kept_reads = [e for e in found if "count" not in e["details"]]
    assert len(kept_reads) <= 1 + minutes  # the verify, and a read a minute
