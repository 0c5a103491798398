"""The audit: who did what (CALLERS.md 4 and 6).

Kept one by one (`record`): the events of what was done or decided about a customer or a
login (an update, a ticket, a ping, a diagnose, a verify or resolve that was answered, a
login, an MCP tool call about a verified customer), each family in its own capped stream
(streams.py: the newest AUDIT_MAX_EVENTS of each, a capped Redis stream with a Redis
configured, a bounded list in memory) and written as one JSON line on the logger
`isp_gateway.audit`. Counted (`count`): the refusals, one event per caller, event and
minute with `details.count` (tally.py), in a stream of their own that can never evict the
others. The caller, end user and address come from the request's `Caller` (callers.py), the
request id from the request context (logs.request_id_var).

Details are small and never hold a customer's name, address, document or phone in clear, nor
a password or key (masking.py).

Wiring: services.py builds one `AuditLog` (on the runtime) and starts its flushing task;
a service then `await audit.record("verify", "failed", service_id=..., details={...})`
before the answer is sent, or `audit.count("scope_denied", "denied", ...)` for a refusal.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping
from typing import Any, Literal, get_args

from fastapi import Request

from isp_gateway.audit.masking import (
    AuditDetailRefused,
    mask_details,
    mask_digits,
    service_id_value,
)
from isp_gateway.audit.streams import (
    COUNTED,
    FAMILIES,
    ORDER,
    PAGE,
    AuditQuery,
    CountedStream,
    Stream,
    family_keys,
    merged,
)
from isp_gateway.audit.tally import Tally, now_text
from isp_gateway.kit.actions import Action
from isp_gateway.kit.callers import Caller, current_caller
from isp_gateway.store import Store
from isp_gateway.web.logs import request_id_var

__all__ = [
    "AUDIT_KEY",
    "EVENTS",
    "AuditDetailRefused",
    "AuditEventName",
    "AuditLog",
    "AuditQuery",
    "get_audit_log",
    "mask_details",
    "mask_digits",
]

log = logging.getLogger("isp_gateway.audit")

AUDIT_KEY = "audit:events"
# How long the mark of a caller's first outcome of a minute lives: past its minute, with a
# margin for the clocks of workers a little apart.
FIRST_SECONDS = 120

AuditEventName = Literal[
    "login",
    "verify",
    "resolve",
    "client_update",
    "ticket_create",
    "ping",
    "diagnose",
    "scope_denied",
    Action.VERIFICATION_REQUIRED,
    "mcp_tool",
    # CALLERS.md 6: a request refused for its credential (401) or its rate (429), counted.
    "unauthorized",
    Action.RATE_LIMITED,
    "outage",
    "webhook",
    # Money (MONEY.md): a promise `created`, `refused` (+ reason) or `failed`; a report
    # `received`, `duplicate` or `failed`.
    "payment_promise",
    "payment_report",
]
EVENTS: tuple[str, ...] = get_args(AuditEventName)


def _line(entry: Mapping[str, Any]) -> None:
    shown = {key: value for key, value in entry.items() if key != ORDER}
    log.info(json.dumps(shown, ensure_ascii=True, separators=(",", ":")))


class AuditLog:
    def __init__(
        self, store: Store, max_events: int, *, key: str = AUDIT_KEY, enabled: bool = True
    ) -> None:
        self._store = store
        self.max_events = max_events
        self._key = key
        # AUDIT_ENABLED=false: events are built (and checked) but neither logged nor stored.
        self.enabled = enabled
        self._tally = Tally(store, key + COUNTED, max_events, _line)

    def _entry(
        self,
        event: str,
        outcome: str,
        who: Caller | None,
        service_id: int | str | None,
        details: Mapping[str, Any] | None,
        request_id: str | None,
    ) -> dict[str, Any]:
        if event not in EVENTS:
            raise ValueError(f"unknown audit event {event!r}")
        return {
            "time": now_text(),
            "event": event,
            "outcome": str(outcome),
            "caller": who.caller if who else None,
            "end_user": who.end_user if who else None,
            "address": who.address if who else None,
            "request_id": request_id if request_id is not None else request_id_var.get(),
            "service_id": service_id_value(service_id),
            "details": mask_details(details),
        }

    async def record(
        self,
        event: str,
        outcome: str,
        *,
        service_id: int | str | None = None,
        details: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
        request_id: str | None = None,
    ) -> dict[str, Any]:
        """Record one event and return it as kept. The caller defaults to the request's
        (callers.current_caller), the request id to the request's. The log line is written
        first, so an event is never lost from the logs even when the store is away (then
        this raises StoreUnavailable, 503, like every other store use). An event that is
        only ever counted (a refusal) is a programming error here."""
        if event in EVENTS and event not in FAMILIES:
            raise ValueError(f"the audit event {event!r} is counted: use count()")
        who = caller if caller is not None else current_caller()
        entry = self._entry(event, outcome, who, service_id, details, request_id)
        if not self.enabled:
            return entry
        _line(entry)
        stored = {**entry, ORDER: time.time_ns()}
        await self._store.log_append(self._key + FAMILIES[event], stored, self.max_events)
        return entry

    def count(
        self,
        event: str,
        outcome: str,
        *,
        service_id: int | str | None = None,
        details: Mapping[str, Any] | None = None,
        kind: str | None = None,
        caller: Caller | None = None,
        anonymous_from: str | None = None,
    ) -> None:
        """Count one refusal (CALLERS.md 6): no store call and no log line now; the event
        of its caller, event, outcome, `kind` and minute (the first refusal's, with
        `details.count`) is stored and logged by the next flush, within a second. `kind`
        is a short label from a fixed set (a scope, a tool) that keeps apart what an
        auditor must not see merged; `anonymous_from` is the address of a request with no
        valid credential (a 401), which has no caller."""
        if event not in EVENTS:
            raise ValueError(f"unknown audit event {event!r}")
        if not self.enabled:
            return
        who: Caller | None = None
        name = None
        if anonymous_from is None:
            who = caller if caller is not None else current_caller()
            name = who.caller if who else None

        def make() -> dict[str, Any]:
            # Made for the first of its group only (an anonymous caller too).
            named = Caller("", "", anonymous_from) if anonymous_from is not None else who
            entry = self._entry(event, outcome, named, service_id, details, None)
            if anonymous_from is not None:
                entry["caller"] = entry["end_user"] = None
            entry[ORDER] = time.time_ns()
            return entry

        self._tally.add((name, event, str(outcome), kind), make)

    def count_about(
        self,
        event: str,
        outcome: str,
        service_id: int | None,
        details: Mapping[str, Any] | None = None,
        reason: str | None = None,
    ) -> None:
        """Count an outcome about one service that asked nothing new of the backend and
        that a caller may repeat at no cost (a refusal, a write refused with nothing sent to
        the backend, a ping that joined a running task, a diagnose answered from what the
        gateway holds; CALLERS.md 6): one event per caller,
        event, outcome, service, `reason` (default: `details["reason"]`) and minute. None
        for a service that does not exist: it names no customer, and its outcomes group per
        caller alone, so a loop over made-up ids adds one event a minute, not one an id."""
        if reason is None:
            reason = (details or {}).get("reason") or ""
        kind = f"{'-' if service_id is None else service_id}:{reason}"
        self.count(event, outcome, service_id=service_id, details=details, kind=kind)

    async def record_once_a_minute(
        self,
        event: str,
        outcome: str,
        service_id: int,
        details: Mapping[str, Any] | None = None,
        kind: str | None = None,
    ) -> None:
        """Record the first `outcome` of the request's caller about `service_id` in a minute
        one by one, and count the others (count_about): for a success a caller may repeat
        as often as it likes at no cost (a verify it passes again, an MCP tool's read of the
        customer its verification names), which must still say who did it and when, but
        whose loop must not push other events out of its stream. Keyed by the caller, not
        the end user it names (its own claim, free to rotate), and by `kind` when given (a
        tool: each tool's first read of the minute is kept)."""
        if not self.enabled:
            return
        who = current_caller()
        name = who.caller if who is not None else "-"
        minute = int(time.time() // 60)
        digest = hashlib.blake2s(
            json.dumps([name, event, str(outcome), service_id, kind]).encode(), digest_size=10
        ).hexdigest()
        first = f"{self._key}:first:{minute}:{digest}"
        if await self._store.set_if_absent(first, True, ttl=FIRST_SECONDS):
            await self.record(event, outcome, service_id=service_id, details=details)
        else:
            self.count_about(event, outcome, service_id, details, kind)

    async def flush(self) -> None:
        """Store this worker's counted refusals now (a reader sees its own at once)."""
        if not self._tally.idle:
            await self._tally.flush()

    def start(self) -> None:
        """The worker's flushing task (inside a running event loop)."""
        if self.enabled:
            self._tally.start()

    async def aclose(self) -> None:
        await self._tally.aclose()

    async def query(
        self,
        *,
        service_id: int | None = None,
        caller: str | None = None,
        event: str | None = None,
        limit: int = 100,
    ) -> list[dict[str, Any]]:
        """The newest `limit` events that match every filter given, newest first, from
        every stream that may hold them. Looks at the newest `max_events` entries of each
        stream at most (Redis may keep a few more)."""
        if limit < 1:
            return []
        await self.flush()
        wanted = AuditQuery(service_id, caller, event)
        page = limit if wanted.unfiltered else max(limit, PAGE)
        streams: list[Stream] = [
            Stream(self._store, key, self.max_events, page, wanted)
            for key in family_keys(self._key, event)
        ]
        streams.append(
            CountedStream(self._store, self._key + COUNTED, self.max_events, page, wanted)
        )
        found = await merged(streams, limit)
        # A counted event whose minute may not be over: its count is the counter's now.
        live = [item for item in found if item.tally is not None]
        if live:
            counts = await self._store.get_many([item.tally for item in live if item.tally])
            for item, value in zip(live, counts, strict=True):
                details = item.entry["details"]
                if value is not None and int(value) > int(details.get("count", 0)):
                    details["count"] = int(value)
        return [item.entry for item in found]


async def get_audit_log(request: Request) -> AuditLog:
    """The running service's AuditLog (a FastAPI dependency): the runtime's, so a reader
    flushes the very counts this worker holds."""
    audit: AuditLog = request.app.state.runtime.audit
    return audit
