"""Schemathesis hooks for tests/contract/test_schemathesis.py (loaded via SCHEMATHESIS_HOOKS).

`before_call`: every generated ticket request carries its own Idempotency-Key. The fuzzer
draws header values from a tiny space and so sends one key with several bodies, which the
service rightly answers 422 `idempotency_key_reused` (DECISIONS.md); that is a state conflict
the idempotency tests cover, not a schema-valid request refused for its shape. A key that is
itself invalid (over 255 characters) is kept, so its 422 is still checked.

`only_fair_share_503` (a check, run with `--checks all`): the fuzzer runs against the shipped
upstream budget, so its own fair share of the minute (CALLERS.md 2, UPSTREAM_CALLER_SHARE)
runs out; the one 503 accepted is that refusal, `upstream_rate_limited` with a positive
Retry-After. Any other 503 fails the run. The check also appends every answer's status to the
file named by ST_STATUS_LOG, so the test can print the count by status.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Any
from urllib.parse import unquote

import schemathesis

KEY = "Idempotency-Key"
MAX_KEY_LENGTH = 255
STATUS_LOG = "ST_STATUS_LOG"
ZONES = "ST_ZONES"
TECHNICIANS = "ST_TECHNICIANS"
AUDIT = "/api/v1/audit"
TICKETS = "/api/v1/tickets"
API_KEY_HEADER = "x-api-key"


def _zones() -> dict[int, int]:
    path = os.environ.get(ZONES)
    if not path:
        return {}
    with open(path, encoding="utf-8") as file:
        return {int(sid): int(zone) for sid, zone in json.load(file).items()}


def _technicians() -> list[int]:
    path = os.environ.get(TECHNICIANS)
    if not path:
        return []
    with open(path, encoding="utf-8") as file:
        return sorted(int(tid) for tid in json.load(file))


_ZONE_OF = _zones()
_TECHNICIANS = _technicians()


@schemathesis.hook
def before_call(ctx: Any, case: Any, **kwargs: Any) -> None:
    key = (case.headers or {}).get(KEY)
    if isinstance(key, str) and len(key) <= MAX_KEY_LENGTH:
        case.headers[KEY] = uuid.uuid4().hex
    _zone_of_the_record(case)
    _a_technician_the_backend_has(case)
    _audit_service_id_as_an_integer(case)
    _bearer_only(case)


def _a_technician_the_backend_has(case: Any) -> None:
    """A ticket names a technician the backend has: only the backend knows its staff, and it
    refuses another id, which the gateway answers 400 `ticket_creation_failed` naming the
    field (CALLERS.md 2), a refusal tests/tickets cover. A schema-valid id (an integer >= 1)
    is swapped for a staff id; an invalid one is kept, so its refusal is still checked."""
    body = case.body
    if case.method.upper() != "POST" or case.path != TICKETS or not isinstance(body, dict):
        return
    tid = _integer(body.get("technician_id"))
    if tid is not None and tid >= 1 and _TECHNICIANS and tid not in _TECHNICIANS:
        body["technician_id"] = _TECHNICIANS[tid % len(_TECHNICIANS)]


def _audit_service_id_as_an_integer(case: Any) -> None:
    """The stateful phase infers a link from a service-id path (a string: digits with
    surrounding whitespace allowed, e.g. "610\\v ") to the audit's integer `service_id`
    filter and copies the path's text as is, which it then holds to be valid. The value the
    link means is the integer; a made-up string that is no such number is kept. (The path's
    own whitespace rule is CALLERS.md 2's `invalid_service_id`; the audit filter is typed.)"""
    query = case.query
    if case.method.upper() != "GET" or case.path != AUDIT or not isinstance(query, dict):
        return
    value = query.get("service_id")
    if not isinstance(value, str):
        return
    # The link copies the path's text, percent-encoded as sent ("%0C%20...1490") or not.
    text = unquote(value).strip()
    if text.isdigit() and text.isascii():
        query["service_id"] = int(text)


def _bearer_only(case: Any) -> None:
    """The run authenticates with the Bearer token it was given; the schema also declares the
    `X-API-Key` scheme, for which the fuzzer can only make up values (empty, "null"), and an
    X-API-Key is always read as a key first (CALLERS.md 3), so two thirds of the run were
    401s that never reached an operation. A made-up key's 401 is the auth tests' concern."""
    headers = case.headers or {}
    for name in [n for n in headers if n.lower() == API_KEY_HEADER]:
        del headers[name]


def _zone_of_the_record(case: Any) -> None:
    """A ticket for a service the backend has names that service's zone (CALLERS.md 2): the
    fuzzer draws `zone_id` blind, and a schema-valid body naming another zone is rightly
    answered 422 `zone_mismatch`, a state conflict tests/tickets cover, not a shape refusal.
    Only an integer zone (`3` or `3.0`) for an existing service is replaced (by another
    integer), so a request that was schema-invalid stays so."""
    body = case.body
    if case.method.upper() != "POST" or case.path != TICKETS or not isinstance(body, dict):
        return
    sid, zone = _integer(body.get("service_id")), _integer(body.get("zone_id"))
    if sid is not None and zone is not None and sid in _ZONE_OF:
        body["zone_id"] = _ZONE_OF[sid]


def _integer(value: Any) -> int | None:
    """An integer as the service reads one (JSON `193` or `193.0`), else None."""
    if type(value) is int:
        return value
    if type(value) is float and value.is_integer():
        return int(value)
    return None


@schemathesis.check
def only_fair_share_503(ctx: Any, response: Any, case: Any) -> bool | None:
    path = os.environ.get(STATUS_LOG)
    if path:
        with open(path, "a", encoding="utf-8") as log:
            auth = (
                "auth"
                if "authorization" in {k.lower() for k in response.request.headers}
                else "noauth"
            )
            log.write(f"{case.method} {case.path} {auth} {response.status_code}\n")

    if response.status_code != 503:
        return None
    try:
        body = json.loads(response.content)
    except ValueError:
        body = None
    action = body.get("action") if isinstance(body, dict) else None
    meta = body.get("meta") if isinstance(body, dict) else None
    reason = meta.get("reason") if isinstance(meta, dict) else None
    # The ticket endpoint answers the same refusal as its own 503 `ticket_creation_failed`
    # with `meta.reason: upstream_rate_limited` (documented there; tests/tickets).
    assert "upstream_rate_limited" in (action, reason), (
        f"503 that is not the fair share: {action!r} (reason {reason!r})"
    )
    retry_after = response.headers.get("retry-after") or response.headers.get("Retry-After")
    if isinstance(retry_after, list):
        retry_after = retry_after[0] if retry_after else None
    assert retry_after and str(retry_after).isdigit() and int(retry_after) > 0, (
        f"503 upstream_rate_limited without a usable Retry-After: {retry_after!r}"
    )
    return None
