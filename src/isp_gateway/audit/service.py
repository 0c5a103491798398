"""The audit: who did what (CALLERS.md 4).

One event per call that matters (a login, a verification, an update, a ticket, a ping, a
refusal), kept in the store (the newest AUDIT_MAX_EVENTS: a capped Redis stream with a
Redis configured, a bounded list in memory) and written as one JSON line on the logger
`isp_gateway.audit`. The caller, end user and address come from the request's `Caller`
(callers.py), the request id from the request context (logs.request_id_var).

Details are small and never hold a customer's name, address, document or phone in clear, nor
a password or key: `AuditLog.record` masks documents and phones (`***` and their last two
digits) and refuses the other names outright (`AuditDetailRefused`, a programming error).

Wiring: build one `AuditLog(store, settings.AUDIT_MAX_EVENTS)` in the lifespan (kept on
`app.state.audit`, or `get_audit_log` builds it on first use), then in a route or service
`await audit.record("verify", "failed", service_id=service_id, details={...})`, before the
answer is sent.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from fastapi import Request

from isp_gateway.kit.actions import Action
from isp_gateway.kit.callers import Caller, current_caller
from isp_gateway.store import Store
from isp_gateway.web.logs import request_id_var

log = logging.getLogger("isp_gateway.audit")

AUDIT_KEY = "audit:events"

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
    # Money (MONEY.md): a promise `created`, `refused` (+ reason) or `failed`; a report
    # `received`, `duplicate` or `failed`.
    "payment_promise",
    "payment_report",
]
EVENTS: tuple[str, ...] = get_args(AuditEventName)

# How many entries one store read brings back while a filtered query pages back.
_PAGE = 500
# Details: at most this many entries, strings cut to this length, lists to this many items.
MAX_DETAILS = 12
MAX_TEXT = 200
MAX_ITEMS = 20

# Words that, in a detail's key, mean its value is a document or a phone: kept as "***" and
# its last two digits.
MASKED_WORDS = frozenset(
    {
        "document",
        "documents",
        "documento",
        "doc",
        "cedula",
        "identificacion",
        "nit",
        "phone",
        "phones",
        "telefono",
        "tel",
        "celular",
        "movil",
        "mobile",
        "whatsapp",
        # A payment's bank reference (MONEY.md 2: masked like a document).
        "reference",
        "referencia",
    }
)
# Words that may never name a detail: a person's name or address, a password, a key or token.
REFUSED_WORDS = frozenset(
    {
        "name",
        "names",
        "fullname",
        "nombre",
        "nombres",
        "apellido",
        "apellidos",
        "address",
        "direccion",
        "password",
        "passwd",
        "pwd",
        "contrasena",
        "clave",
        "secret",
        "key",
        "apikey",
        "token",
        "authorization",
        "credentials",
    }
)
_WORDS = re.compile(r"[a-z0-9]+")
# Six or more digits, maybe with spaces, dots, dashes or parentheses between (a phone).
_DIGIT_RUN = re.compile(r"\d(?:[\s().-]*\d){5,}")
_SERVICE_ID = re.compile(r"[0-9]{1,10}")


class AuditDetailRefused(ValueError):
    """A detail would put a name, address, password or key in the audit. A bug in the
    caller of `record`, raised so a test catches it; the message names the detail's key
    only, never its value."""


def mask_digits(value: object) -> str:
    """A document or phone as `***` and its last two digits (`***` alone when it has fewer
    than two digits)."""
    digits = re.sub(r"\D", "", str(value))
    return "***" + digits[-2:] if len(digits) >= 2 else "***"


def _words(key: str) -> list[str]:
    return _WORDS.findall(key.lower().replace("ó", "o").replace("ñ", "n"))


def _refused(words: list[str]) -> bool:
    return "".join(words) in REFUSED_WORDS or any(word in REFUSED_WORDS for word in words)


def _masked(words: list[str]) -> bool:
    return "".join(words) in MASKED_WORDS or any(word in MASKED_WORDS for word in words)


def _scalar(value: object) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    text = str(value)[: MAX_TEXT * 4]
    if "igw_" in text:
        raise AuditDetailRefused("an API key in a detail value")
    # Any other long run of digits (a document or phone under another name) is masked too.
    text = _DIGIT_RUN.sub(lambda m: mask_digits(m.group()), text)
    return text[:MAX_TEXT]


def mask_details(details: Mapping[str, Any] | None) -> dict[str, Any]:
    """Details as the audit keeps them: documents and phones masked, long digit runs
    masked, texts and lists cut short. Raises AuditDetailRefused for a name, address,
    password or key (by the detail's key), a nested object, or too many entries."""
    if not details:
        return {}
    if len(details) > MAX_DETAILS:
        raise AuditDetailRefused(f"more than {MAX_DETAILS} details")
    out: dict[str, Any] = {}
    for key, value in details.items():
        if not isinstance(key, str) or not key:
            raise AuditDetailRefused("a detail without a text key")
        words = _words(key)
        if _refused(words):
            raise AuditDetailRefused(f"the detail {key!r} may not be audited")
        if isinstance(value, Mapping):
            raise AuditDetailRefused(f"the detail {key!r} is an object; keep details flat")
        many = isinstance(value, list | tuple | set | frozenset)
        items = list(value)[:MAX_ITEMS] if many else [value]
        if any(isinstance(item, Mapping | list | tuple | set | frozenset) for item in items):
            raise AuditDetailRefused(f"the detail {key!r} nests; keep details flat")
        if _masked(words):
            kept = [None if item is None else mask_digits(item) for item in items]
        else:
            kept = [_scalar(item) for item in items]
        out[key] = kept if many else kept[0]
    return out


def _service_id(value: int | str | None) -> int | str | None:
    if value is None or isinstance(value, int):
        return value
    text = str(value)
    return int(text) if _SERVICE_ID.fullmatch(text) else _scalar(text)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class AuditQuery:
    service_id: int | None = None
    caller: str | None = None
    event: str | None = None

    def matches(self, event: Mapping[str, Any]) -> bool:
        if self.event is not None and event.get("event") != self.event:
            return False
        if self.caller is not None and event.get("caller") != self.caller:
            return False
        return self.service_id is None or str(event.get("service_id")) == str(self.service_id)


class AuditLog:
    def __init__(
        self, store: Store, max_events: int, *, key: str = AUDIT_KEY, enabled: bool = True
    ) -> None:
        self._store = store
        self.max_events = max_events
        self._key = key
        # AUDIT_ENABLED=false: events are built (and checked) but neither logged nor stored.
        self.enabled = enabled

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
        this raises StoreUnavailable, 503, like every other store use)."""
        if event not in EVENTS:
            raise ValueError(f"unknown audit event {event!r}")
        who = caller if caller is not None else current_caller()
        entry: dict[str, Any] = {
            "time": _now(),
            "event": event,
            "outcome": str(outcome),
            "caller": who.caller if who else None,
            "end_user": who.end_user if who else None,
            "address": who.address if who else None,
            "request_id": request_id if request_id is not None else request_id_var.get(),
            "service_id": _service_id(service_id),
            "details": mask_details(details),
        }
        if not self.enabled:
            return entry
        log.info(json.dumps(entry, ensure_ascii=True, separators=(",", ":")))
        await self._store.log_append(self._key, entry, self.max_events)
        return entry

    async def query(
        self,
        *,
        service_id: int | None = None,
        caller: str | None = None,
        event: str | None = None,
        limit: int = 100,
    ) -> list[dict[str, Any]]:
        """The newest `limit` events that match every filter given, newest first. Looks at
        the newest `max_events` events at most (Redis may keep a few more)."""
        if limit < 1:
            return []
        wanted = AuditQuery(service_id, caller, event)
        unfiltered = service_id is None and caller is None and event is None
        found: list[dict[str, Any]] = []
        seen = 0
        before: str | None = None
        while seen < self.max_events:
            room = self.max_events - seen
            count = min(room, limit if unfiltered else max(limit, _PAGE))
            page = await self._store.log_read(self._key, count, before)
            for _, entry in page:
                if wanted.matches(entry):
                    found.append(entry)
                    if len(found) >= limit:
                        return found
            seen += len(page)
            if len(page) < count:
                break
            before = page[-1][0]
            # A filter that matches little may read the whole log: let other requests run
            # between pages (the memory store never yields on its own).
            await asyncio.sleep(0)
        return found


async def get_audit_log(request: Request) -> AuditLog:
    """The app's AuditLog (a FastAPI dependency): `app.state.audit` when the lifespan set
    one, else built on first use from the runtime's store and settings."""
    state = request.app.state
    audit: AuditLog | None = getattr(state, "audit", None)
    if audit is None:
        runtime = state.runtime
        settings = runtime.settings
        audit = AuditLog(runtime.store, settings.AUDIT_MAX_EVENTS, enabled=settings.AUDIT_ENABLED)
        state.audit = audit
    return audit
