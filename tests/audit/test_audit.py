"""The audit (CALLERS.md 4): AuditLog on the memory store and the real Redis (db 6), its cap,
its order, its filters, its log line and its masking; and GET /api/v1/audit on the real app
(added by the test: the app serves it once the scope dependency exists)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, FastAPI, Request

from isp_gateway.audit import router as audit_router
from isp_gateway.audit.service import (
    AuditDetailRefused,
    AuditLog,
    mask_details,
    mask_digits,
)
from isp_gateway.kit.callers import Caller, set_current_caller
from isp_gateway.kit.errors import StoreUnavailable
from isp_gateway.store import Store
from isp_gateway.store.redis import RedisStore
from isp_gateway.web.logs import request_id_var
from tests.conftest import Gateway, StartGateway
from tests.support import RUN, free_port, memory_or_redis_store

REDIS_DB = 6
KEY = f"{RUN}:audit"

pytestmark = pytest.mark.anyio

# What every event holds (CALLERS.md 4).
EVENT_FIELDS = {
    "time",
    "event",
    "outcome",
    "caller",
    "end_user",
    "address",
    "request_id",
    "service_id",
    "details",
}

BOT = Caller(caller="jwt:bot", end_user="chat-123", address="203.0.113.7")
AGENT = Caller(caller="agent-key", end_user="agent-key", address="198.51.100.2")


store = memory_or_redis_store(REDIS_DB, f"ispgw:{RUN}:*")


def audit_log(store: Store, max_events: int = 100_000) -> AuditLog:
    return AuditLog(store, max_events, key=KEY)


async def in_request(caller: Caller | None, request_id: str, work: Callable[[], Any]) -> Any:
    """Run `work` as a request would: its caller and request id in its own context."""

    async def run() -> Any:
        if caller is not None:
            set_current_caller(caller)
        request_id_var.set(request_id)
        return await work()

    return await asyncio.create_task(run())  # a task runs in a copy of the context


async def test_an_event_holds_who_what_when(store: Store) -> None:
    audit = audit_log(store)
    entry = await in_request(
        BOT,
        "req-1",
        lambda: audit.record(
            "verify", "failed", service_id=42, details={"attempts_left": 3, "document": "1234567"}
        ),
    )
    assert set(entry) == EVENT_FIELDS
    assert entry["event"] == "verify" and entry["outcome"] == "failed"
    assert (entry["caller"], entry["end_user"], entry["address"]) == (
        "jwt:bot",
        "chat-123",
        "203.0.113.7",
    )
    assert entry["request_id"] == "req-1"
    assert entry["service_id"] == 42
    assert entry["details"] == {"attempts_left": 3, "document": "***67"}
    when = datetime.fromisoformat(entry["time"].replace("Z", "+00:00"))
    assert when.utcoffset() == timedelta(0)
    assert abs(datetime.now(UTC) - when) < timedelta(seconds=5)
    assert await audit.query() == [entry]


async def test_outside_a_request_the_who_is_null_and_service_may_be_absent(store: Store) -> None:
    audit = audit_log(store)
    entry = await in_request(None, "bg", lambda: audit.record("login", "locked"))
    assert entry["caller"] is None and entry["end_user"] is None and entry["address"] is None
    assert entry["service_id"] is None
    assert entry["details"] == {}
    # An explicit caller (the login route knows the address before any credential).
    login = await audit.record("login", "failed", caller=BOT, request_id="r9")
    assert login["caller"] == "jwt:bot" and login["request_id"] == "r9"


async def test_unknown_event_is_a_bug(store: Store) -> None:
    with pytest.raises(ValueError, match="unknown audit event"):
        await audit_log(store).record("delete_everything", "ok")


async def test_newest_first_and_the_limit(store: Store) -> None:
    audit = audit_log(store)
    for n in range(30):
        await audit.record("ping", f"o{n}", service_id=n + 1, caller=BOT)
    listed = await audit.query(limit=7)
    assert [e["outcome"] for e in listed] == [f"o{n}" for n in range(29, 22, -1)]
    everything = await audit.query(limit=500)
    assert [e["outcome"] for e in everything] == [f"o{n}" for n in range(29, -1, -1)]
    assert await audit.query(limit=0) == []


async def test_the_cap_keeps_only_the_newest(store: Store) -> None:
    audit = audit_log(store, max_events=10)
    for n in range(250):
        await audit.record("ping", f"o{n}", service_id=7, caller=BOT)
    kept = await audit.query(limit=500)
    assert [e["outcome"] for e in kept] == [f"o{n}" for n in range(249, 239, -1)]
    # Filters look no further back than the cap either.
    assert await audit.query(service_id=7, limit=500) == kept
    assert await audit.query(event="ping", caller="jwt:bot", limit=3) == kept[:3]
    if isinstance(store, RedisStore):
        # The stream itself is trimmed (MAXLEN ~ keeps whole blocks: a few more may stay).
        raw = store._redis
        assert await raw.xlen(f"ispgw:{KEY}") < 250


async def test_filters_each_and_together(store: Store) -> None:
    audit = audit_log(store)
    await audit.record("verify", "verified", service_id=1, caller=BOT)
    await audit.record("verify", "failed", service_id=2, caller=AGENT)
    await audit.record("ticket_create", "created", service_id=1, caller=AGENT)
    await audit.record("login", "ok", caller=BOT)
    await audit.record("diagnose", "service_active", service_id="1", caller=BOT)

    def outcomes(events: list[dict[str, Any]]) -> list[str]:
        return [e["outcome"] for e in events]

    assert outcomes(await audit.query(service_id=1)) == ["service_active", "created", "verified"]
    assert outcomes(await audit.query(caller="agent-key")) == ["created", "failed"]
    assert outcomes(await audit.query(event="verify")) == ["failed", "verified"]
    assert outcomes(await audit.query(service_id=1, caller="agent-key")) == ["created"]
    assert outcomes(await audit.query(service_id=1, event="verify", caller="jwt:bot")) == [
        "verified"
    ]
    # Nothing matches: another id, a caller spelt differently, a prefix of a caller.
    assert await audit.query(service_id=3) == []
    assert await audit.query(caller="JWT:bot") == []
    assert await audit.query(caller="agent") == []
    assert await audit.query(service_id=1, event="login") == []


async def test_a_filter_pages_back_past_many_newer_events(store: Store) -> None:
    audit = audit_log(store)
    await audit.record("client_update", "updated", service_id=99, caller=AGENT)
    for n in range(1200):  # more than two store pages of other events
        await audit.record("ping", f"o{n}", service_id=5, caller=BOT)
    await audit.record("client_update", "failed", service_id=99, caller=AGENT)
    found = await audit.query(service_id=99, limit=10)
    assert [e["outcome"] for e in found] == ["failed", "updated"]
    assert [e["outcome"] for e in await audit.query(event="client_update", limit=1)] == ["failed"]


async def test_one_json_log_line_per_event(store: Store, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="isp_gateway.audit")
    audit = audit_log(store)
    first = await audit.record("mcp_tool", "ok", details={"tool": "find_customer"}, caller=AGENT)
    second = await audit.record(
        "client_update", "updated", service_id=8, details={"fields": ["phone"]}, caller=BOT
    )
    lines = [r for r in caplog.records if r.name == "isp_gateway.audit"]
    assert len(lines) == 2
    assert [json.loads(r.getMessage()) for r in lines] == [first, second]
    assert all(r.levelno == logging.INFO for r in lines)


async def test_a_store_away_still_logs_then_answers_503(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="isp_gateway.audit")
    dead = RedisStore(f"redis://127.0.0.1:{free_port()}/0")
    try:
        with pytest.raises(StoreUnavailable):
            await audit_log(dead).record("login", "locked", caller=BOT)
        with pytest.raises(StoreUnavailable):
            await audit_log(dead).query()
    finally:
        await dead.close()
    assert len([r for r in caplog.records if r.name == "isp_gateway.audit"]) == 1


# -- masking ---------------------------------------------------------------------------------


def test_mask_digits() -> None:
    assert mask_digits("1.234.567.890") == "***90"
    assert mask_digits("+57 300 111 2233") == "***33"
    assert mask_digits(1234567) == "***67"
    assert mask_digits("7") == "***"
    assert mask_digits("") == "***"


def test_documents_and_phones_are_masked_under_any_spelling() -> None:
    masked = mask_details(
        {
            "document": "1020304050",
            "cedula": "99887766",
            "phone": "+57 300-111-2233",
            "new_phone": "3209998877",
            "Telefono": "3001112233",
            "phones": ["3001112233", "3114445566"],
            "document_type": None,
            "attempts_left": 2,
        }
    )
    assert masked == {
        "document": "***50",
        "cedula": "***66",
        "phone": "***33",
        "new_phone": "***77",
        "Telefono": "***33",
        "phones": ["***33", "***66"],
        "document_type": None,
        "attempts_left": 2,
    }


def test_a_number_hidden_in_free_text_is_masked() -> None:
    masked = mask_details({"query": "cliente con celular 300 111 2233 o cc 1.020.304.050"})
    text = masked["query"]
    for leak in ("300 111 2233", "3001112233", "1.020.304.050", "1020304050", "111", "304"):
        assert leak not in text
    assert "***33" in text and "***50" in text


@pytest.mark.parametrize(
    "details",
    [
        {"name": "Ana Pérez"},
        {"nombre": "Ana"},
        {"customer_name": "Ana"},
        {"Full Name": "Ana"},
        {"address": "Calle 1 # 2-3"},
        {"direccion": "Calle 1"},
        {"dirección": "Calle 1"},
        {"password": "hunter2"},
        {"contraseña": "hunter2"},
        {"api_key": "x"},
        {"X-API-Key": "x"},
        {"token": "eyJ..."},
        {"authorization": "Bearer x"},
        {"note": "igw_" + "A" * 43},  # a key under an innocent name
        {"notes": ["ok", "igw_" + "B" * 43]},
        {"client": {"nombre": "Ana"}},  # hidden one level down
        {"fields": [["name", "Ana"]]},
        {f"k{n}": n for n in range(13)},  # not small
    ],
)
async def test_names_addresses_passwords_and_keys_are_refused(
    details: dict[str, Any], store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="isp_gateway.audit")
    audit = audit_log(store)
    with pytest.raises(AuditDetailRefused) as caught:
        await audit.record("client_update", "updated", service_id=1, details=details, caller=BOT)
    # Refused whole: nothing logged, nothing kept, and the message holds no value.
    assert not [r for r in caplog.records if r.name == "isp_gateway.audit"]
    assert await audit.query() == []
    for value in ("Ana", "Calle", "hunter2", "igw_", "eyJ"):
        assert value not in str(caught.value)


def test_field_names_themselves_may_be_listed() -> None:
    # client_update lists the fields that changed, by name: a name of a field is no name.
    assert mask_details({"fields": ["phone", "document"]}) == {"fields": ["phone", "document"]}


def test_texts_and_lists_are_cut_short() -> None:
    masked = mask_details({"subject": "x" * 5000, "ids": list(range(100))})
    assert len(masked["subject"]) == 200
    assert len(masked["ids"]) == 20


# -- GET /api/v1/audit on the real app ---------------------------------------------------------


def add_audit_routes(app: FastAPI) -> None:
    """The audit router (not yet in the app), plus a throwaway route that records an event
    the way a wired route will: the caller in the context, the request id from the edge."""
    app.include_router(audit_router.router)
    probe = APIRouter(prefix="/api/v1/_audit_probe")

    @probe.post("/{service_id}")
    async def record(
        service_id: int, request: Request, audit: audit_router.AuditDep
    ) -> dict[str, Any]:
        host = request.client.host if request.client else "unknown"
        end_user = request.headers.get("x-end-user-id", "jwt:bot")
        set_current_caller(Caller("jwt:bot", end_user, host))
        body = await request.json()
        return await audit.record(
            body["event"], body["outcome"], service_id=service_id, details=body.get("details")
        )

    app.include_router(probe)


@pytest.fixture
def audit_gateway(start_gateway: StartGateway) -> Gateway:
    return start_gateway("http://127.0.0.1:9", prepare=add_audit_routes)


def post_event(gw: Gateway, service_id: int, event: str, outcome: str, **kw: Any) -> Any:
    response = gw.client.post(
        f"/api/v1/_audit_probe/{service_id}",
        json={"event": event, "outcome": outcome, **kw},
        headers={"X-Request-ID": f"rid-{service_id}-{outcome}"},
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_the_route_lists_newest_first_with_filters(audit_gateway: Gateway) -> None:
    gw = audit_gateway
    post_event(gw, 10, "verify", "failed", details={"document": "1234567"})
    post_event(gw, 11, "verify", "verified")
    post_event(gw, 10, "ticket_create", "created", details={"ticket_id": 555})
    response = gw.get("/api/v1/audit")
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is True and body["action"] == "audit_listed"
    assert [e["outcome"] for e in body["data"]] == ["created", "verified", "failed"]
    oldest = body["data"][-1]
    assert oldest["details"] == {"document": "***67"}
    assert oldest["request_id"] == "rid-10-failed"
    assert oldest["caller"] == "jwt:bot" and oldest["address"] == "127.0.0.1"
    by_service = gw.get("/api/v1/audit", params={"service_id": 10}).json()["data"]
    assert [e["outcome"] for e in by_service] == ["created", "failed"]
    by_event = gw.get("/api/v1/audit", params={"event": "verify", "limit": 1}).json()["data"]
    assert [e["outcome"] for e in by_event] == ["verified"]
    assert gw.get("/api/v1/audit", params={"caller": "someone-else"}).json()["data"] == []
    assert gw.get("/api/v1/audit/").status_code == 200


@pytest.mark.parametrize(
    "params",
    [
        {"limit": 0},
        {"limit": 501},
        {"limit": "ten"},
        {"event": "drop_table"},
        {"service_id": "abc"},
        {"service_id": 0},
        {"service_id": 10**10},
        {"caller": "x" * 141},
    ],
)
def test_bad_queries_answer_422_in_the_envelope(
    audit_gateway: Gateway, params: dict[str, Any]
) -> None:
    response = audit_gateway.get("/api/v1/audit", params=params)
    assert response.status_code == 422
    body = response.json()
    assert body["ok"] is False and body["action"] == "validation_error"


def test_the_route_needs_a_credential(audit_gateway: Gateway) -> None:
    for headers in ({}, {"Authorization": "Bearer not-a-token"}):
        response = httpx.get(f"{audit_gateway.url}/api/v1/audit", headers=headers)
        assert response.status_code == 401
        assert response.json() == {"detail": "Could not validate credentials."}
