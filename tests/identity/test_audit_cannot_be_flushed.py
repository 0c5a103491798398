"""CALLERS.md 6, "The audit cannot be flushed", on `serve --workers 2` with Redis (issue 24):
a `plans:read` key refused thousands of times (with bad tokens and a key past its rate
beside it) leaves the earlier `client_update` in the audit, its refusals counted as one
event per (caller, event, minute) with `details.count` over both workers; an agent's MCP
reads name the customer they read, so `?service_id=` shows who read it, and a key calling
catalogue tools in a loop evicts none of them."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from isp_gateway.audit.service import AuditLog
from isp_gateway.kit.callers import Caller, set_current_caller
from isp_gateway.store import Store
from tests.agents.conftest import call, mcp_session_at
from tests.identity.conftest import ServeWorkers, counted, events
from tests.support import RUN, memory_or_redis_store

REDIS_DB = 2
CAP = 100  # AUDIT_MAX_EVENTS' least value: thousands of refusals are many times that
ROUNDS = 100  # per thread, 8 threads, 3 kinds of refusal: 2,400 refused requests, 24 times CAP
THREADS = 8
STATEMENT = {"name": "Juan Perez", "address": "Vereda el Rosal", "plan_name": "plan 10mb"}


def test_a_refused_key_cannot_flush_the_audit(serve_workers: ServeWorkers) -> None:
    served = serve_workers(
        keys={"catalogue": ["plans:read"], "slow": (["plans:read"], 5)},
        AUDIT_MAX_EVENTS=CAP,
    )
    # The event that must stay: a bot changes a customer's phone.
    update = served.put("/api/v1/clients/101", json={"phone": "3209998877"})
    assert update.status_code == 200, update.text
    started = time.time()

    refusals = [
        # 403 scope_denied: a plans:read key on a client lookup.
        ("/api/v1/clients/by-document/12345678", {"X-API-Key": served.keys["catalogue"]}),
        # 401: no valid credential.
        ("/api/v1/internet-plans/", {"Authorization": "Bearer not-a-token"}),
        # 429 rate_limited: a key past its 5 requests a minute.
        ("/api/v1/internet-plans/", {"X-API-Key": served.keys["slow"]}),
    ]

    def flood(_: int) -> list[int]:
        statuses = []
        # Fresh connections: both workers take their share.
        with httpx.Client(base_url=served.url, headers={"Connection": "close"}) as http:
            for _ in range(ROUNDS):
                for path, headers in refusals:
                    statuses.append(http.get(path, headers=headers).status_code)
        return statuses

    with ThreadPoolExecutor(THREADS) as pool:
        statuses = [s for batch in pool.map(flood, range(THREADS)) for s in batch]
    minutes = int(time.time() // 60) - int(started // 60) + 1
    assert statuses.count(403) == THREADS * ROUNDS
    assert statuses.count(401) == THREADS * ROUNDS
    limited = statuses.count(429)
    assert limited >= THREADS * ROUNDS - 5 * minutes

    # The write is still there, by event and by service.
    kept = events(served, event="client_update")
    assert [(e["outcome"], e["service_id"], e["caller"]) for e in kept] == [
        ("updated", 101, "jwt:bot")
    ]
    assert "client_update" in {e["event"] for e in events(served, service_id=101)}
    # Every refusal is counted, one event per caller, event and minute over both workers.
    denied = counted(served, THREADS * ROUNDS, event="scope_denied", caller="catalogue")
    assert 1 <= len(denied) <= minutes
    assert denied[0]["details"]["required"] == "clients:read"
    bad = counted(served, THREADS * ROUNDS, event="unauthorized")
    assert 1 <= len(bad) <= minutes
    assert {(e["caller"], e["address"]) for e in bad} == {(None, "127.0.0.1")}
    rate = counted(served, limited, event="rate_limited", caller="slow")
    assert 1 <= len(rate) <= minutes
    # The unfiltered listing still starts with them and reaches back to the write.
    everything = events(served)
    assert "client_update" in {e["event"] for e in everything}
    assert len(everything) < 20


def test_refused_writes_cannot_flush_the_writes(serve_workers: ServeWorkers) -> None:
    """The issue's flood again, with refused writes instead of refused credentials: ticket
    creations with an unknown subject or another zone, and phone updates that are no phone,
    none of which reaches the backend. They evicted the earlier `client_update` from a
    trail of CAP; they are refusals, counted, and it stays."""
    served = serve_workers(
        keys={"writer": ["tickets:write", "clients:write"]}, AUDIT_MAX_EVENTS=CAP
    )
    update = served.put("/api/v1/clients/101", json={"phone": "3209998877"})
    assert update.status_code == 200, update.text
    ticket = {"description": "x", "technician_id": 11, "zone_id": 3}
    refused = [
        ("POST", "/api/v1/tickets", {**ticket, "subject": "zz"}, 400),  # not a catalogue subject
        ("POST", "/api/v1/tickets", {**ticket, "subject": "No Tiene Internet", "zone_id": 9}, 422),
        ("PUT", "/api/v1/clients/{sid}", {"phone": "311-ABC"}, 400),  # not a phone
    ]

    def flood(sid: int) -> list[int]:
        with httpx.Client(base_url=served.url, headers={"Connection": "close"}) as http:
            headers = {"X-API-Key": served.keys["writer"]}
            statuses = []
            for _ in range(CAP // 2):
                for method, path, body, status in refused:
                    payload = {**body, "service_id": sid} if method == "POST" else body
                    got = http.request(
                        method, path.format(sid=sid), json=payload, headers=headers
                    ).status_code
                    statuses.append(got == status)
            return statuses

    with ThreadPoolExecutor(4) as pool:
        answers = [ok for batch in pool.map(flood, (103, 104, 105, 106)) for ok in batch]
    assert all(answers) and len(answers) == 4 * CAP // 2 * 3  # 600 refusals, 6 times CAP
    kept = events(served, event="client_update", caller="jwt:bot")
    assert [(e["outcome"], e["service_id"]) for e in kept] == [("updated", 101)]
    # Counted, every one, each service's apart (an auditor asking about one sees its own).
    tickets = counted(served, 4 * CAP, event="ticket_create", caller="writer")
    assert {e["outcome"] for e in tickets} == {"failed", "zone_mismatch"}
    updates = counted(served, 2 * CAP, event="client_update", caller="writer")
    assert {e["details"]["reason"] for e in updates} == {"invalid_phone"}
    assert {e["service_id"] for e in updates} == {103, 104, 105, 106}
    for_105 = counted(served, 3 * CAP // 2, caller="writer", service_id=105)
    assert {e["event"] for e in for_105} == {"ticket_create", "client_update"}


def test_writes_the_budget_refuses_cannot_flush_the_writes(serve_workers: ServeWorkers) -> None:
    """A key spends its share of the backend's minute on lookups of made-up documents (any
    `clients:read` key can), then sends updates and pings the gateway refuses 503
    `upstream_rate_limited` without asking the backend: refusals, counted, and the earlier
    `client_update` stays (they evicted it before)."""
    served = serve_workers(
        keys={"spender": ["clients:read", "clients:write", "network:ping"]},
        AUDIT_MAX_EVENTS=CAP,
        UPSTREAM_RATE_PER_MINUTE=20,
    )
    update = served.put("/api/v1/clients/101", json={"phone": "3209998877"})
    assert update.status_code == 200, update.text
    with httpx.Client(base_url=served.url, headers={"X-API-Key": served.keys["spender"]}) as http:
        for n in range(200):
            if http.get(f"/api/v1/clients/by-document/{90_000_000 + n}").status_code == 503:
                break
        else:
            raise AssertionError("the budget was never spent")
        statuses = Counter()
        for n in range(2 * CAP):
            sid = 103 + n % 4
            put = http.put(f"/api/v1/clients/{sid}", json={"document": f"7778889{n % 10}"})
            ping = http.post(f"/api/v1/{sid}/ping/", json={"pings": 4})
            statuses[("put", put.status_code)] += 1
            statuses[("ping", ping.status_code)] += 1
    # A minute may turn during the flood: the few it lets through are real writes.
    refused_puts, refused_pings = statuses[("put", 503)], statuses[("ping", 503)]
    assert refused_puts >= 2 * CAP - 20 and refused_pings >= 2 * CAP - 20, statuses
    kept = events(served, event="client_update", caller="jwt:bot")
    assert [(e["outcome"], e["service_id"]) for e in kept] == [("updated", 101)]
    counted(served, refused_puts, event="client_update", caller="spender")
    counted(served, refused_pings, event="ping", caller="spender")


@pytest.mark.anyio
async def test_mcp_reads_name_their_customer_and_a_catalogue_loop_evicts_none(
    serve_workers: ServeWorkers,
) -> None:
    served = serve_workers(keys={"catalogue": ["plans:read"]}, AUDIT_MAX_EVENTS=CAP)
    async with mcp_session_at(served.url, served.token, end_user="wa-77") as session:
        verified = await call(session, "verify_customer", service_id=101, **STATEMENT)
        vid = verified.data["verification_id"]
        assert not (await call(session, "customer_summary", verification_id=vid)).is_error
        assert not (await call(session, "customer_account", verification_id=vid)).is_error
    # Another key lists the plans again and again (served, about no customer), more times
    # than the audit keeps events.
    loops = 3 * CAP
    async with mcp_session_at(served.url, served.keys["catalogue"]) as session:
        for _ in range(loops):
            assert not (await call(session, "list_internet_plans")).is_error

    read = events(served, service_id=101, event="mcp_tool")
    assert [(e["details"]["tool"], e["caller"], e["end_user"]) for e in reversed(read)] == [
        ("verify_customer", "jwt:bot", "wa-77"),
        ("customer_summary", "jwt:bot", "wa-77"),
        ("customer_account", "jwt:bot", "wa-77"),
    ]
    listed = counted(served, loops, event="mcp_tool", caller="catalogue")
    assert {(e["outcome"], e["details"]["tool"], e["service_id"]) for e in listed} == {
        ("ok", "list_internet_plans", None)
    }


# -- the counted stream itself, on the memory store and on Redis -----------------------------

KEY = f"{RUN}:audit"
BOT = Caller("jwt:bot", "chat-1", "203.0.113.7")


store = memory_or_redis_store(REDIS_DB, f"ispgw:{RUN}:*")


async def as_bot(work: Callable[[], Any], who: Caller = BOT) -> Any:
    async def run() -> Any:
        set_current_caller(who)
        return work()

    return await asyncio.create_task(run())


def deny(audit: AuditLog) -> None:
    audit.count("scope_denied", "denied", kind="clients:read", details={"required": "clients:read"})


@pytest.mark.anyio
async def test_two_workers_counting_one_group_write_one_event(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="isp_gateway.audit")
    first, second = AuditLog(store, CAP, key=KEY), AuditLog(store, CAP, key=KEY)
    for audit, times in ((first, 3), (second, 2)):
        for _ in range(times):
            await as_bot(lambda audit=audit: deny(audit))
    await first.flush()
    await second.flush()
    # One event (the first worker's, whose addition created the counter), the live count.
    listed = await first.query(event="scope_denied")
    assert [(e["caller"], e["details"]) for e in listed] == [
        ("jwt:bot", {"required": "clients:read", "count": 5})
    ]
    for _ in range(4):
        await as_bot(lambda: deny(second))
    assert [e["details"]["count"] for e in await second.query(event="scope_denied")] == [9]
    # Written again, final, when its worker stops: still one event, the final count.
    await second.aclose()
    await first.aclose()
    assert [e["details"]["count"] for e in await first.query()] == [9]
    # The log lines of the group add up to its count, one per worker and flush.
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "isp_gateway.audit"]
    assert sum(line["details"]["count"] for line in lines) == 9
    assert all("_at" not in line for line in lines)


@pytest.mark.anyio
async def test_counted_events_keep_their_place_among_kept_ones(store: Store) -> None:
    audit = AuditLog(store, CAP, key=KEY)
    await as_bot(lambda: deny(audit))  # first: an old refusal, counted
    await asyncio.sleep(0.01)
    update = await audit.record("client_update", "updated", service_id=7, caller=BOT)
    # Its event is written after the update (at the flush), and again final at the stop.
    await audit.flush()
    order = [e["event"] for e in await audit.query()]
    assert order == ["client_update", "scope_denied"]
    await audit.aclose()
    listed = await audit.query()
    assert [e["event"] for e in listed] == ["client_update", "scope_denied"]
    assert listed[0] == update
    # Read a page of one at a time: the final entry, newest in its stream, is held back
    # until the reader knows nothing newer is left unread.
    for limit in (1, 2, 3):
        order = [e["event"] for e in await audit.query(limit=limit)]
        assert order == ["client_update", "scope_denied"][:limit]


@pytest.mark.anyio
async def test_refusals_of_many_callers_never_evict_a_kept_event(store: Store) -> None:
    audit = AuditLog(store, CAP, key=KEY)
    await audit.record("client_update", "updated", service_id=7, caller=BOT)
    # A thousand callers refused (a group each): ten times what each stream keeps.
    for n in range(10 * CAP):
        who = Caller(f"key-{n}", f"key-{n}", "198.51.100.9")
        audit.count("rate_limited", "refused", caller=who)
    await audit.aclose()
    kept = await audit.query(event="client_update")
    assert [e["outcome"] for e in kept] == ["updated"]
    newest = await audit.query(limit=5)
    assert {e["event"] for e in newest} == {"rate_limited"}


@pytest.mark.anyio
async def test_a_late_final_event_is_read_in_its_place(store: Store) -> None:
    """The counted stream is written out of `time` order (an event again when final): read
    a page at a time, it still lists newest first."""
    first, second = AuditLog(store, CAP, key=KEY), AuditLog(store, CAP, key=KEY)
    await as_bot(lambda: first.count("verification_required", "refused", service_id=1))
    await first.flush()
    await asyncio.sleep(0.01)
    other = Caller("portal", "portal", "198.51.100.2")  # another group: its own event
    await as_bot(lambda: second.count("verification_required", "refused", service_id=2), other)
    await second.flush()
    await first.aclose()  # the older event, written final after the newer one
    for limit in (1, 2):
        listed = await first.query(limit=limit)
        assert [e["service_id"] for e in listed] == [2, 1][:limit]
    await second.aclose()
