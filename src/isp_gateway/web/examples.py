"""Whole example answers for the OpenAPI document (issue 28.11): one envelope per documented
`action` of every response, as the API sends it, so that /docs and a generated client show
what comes back, not an `action` alone.

`data` is the realistic example of its model where one is written below, else one made
from the schema (its enum's first value, its bounds, a word); the message is the catalogue's
(kit/messages) in the deployment's language, or null where the API answers none.
"""

from __future__ import annotations

import copy
from typing import Any

from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action

_CLIENT = {
    "service_id": 101,
    "name": "MARTHA ORTIZ CARDONA",
    "document": "502327",
    "phone": "3001234567",
    "address": "V/ BUENOS AIRES MZ 3 CASA 7",
    "city": "Cali",
    "locality": "Buenos Aires",
    "payment_status": "Pagadas",
    "zone_id": 7,
    "antenna_ip": "10.7.0.101",
    "cut_off_date": "2026-06-05",
    "outstanding_balance": 0.0,
    "lan_interface": "ether2",
    "internet_plan_name": "Plan Básico 8M",
    "internet_plan_price": 65000.0,
    "technician_id": 16,
    "service_state": "active",
}
_FIGURES = {"task_id": "d815e341a2b04c9f8e1f0c3b5a7d9e21", "sent": 4, "received": 4,
            "loss_percent": 0.0}  # fmt: skip
_OPEN_TICKET = {
    "ticket_id": 1301,
    "subject": "Internet Lento",
    "status_ticket": "Nuevo",
    "priority": "Normal",
    "created_at": "2026-05-20 09:14",
    "end_date": "2026-05-25 09:14",
    "technician": "Carlos Rojas",
}
_INVOICE = {"invoice_id": 9007, "total": 65000.0, "issued_on": "2026-05-01",
            "due_on": "2026-05-15", "overdue": True}  # fmt: skip
# A realistic example per model of the document (the others are made from their schema).
MODELS: dict[str, Any] = {
    "OpenTicketResponse": _OPEN_TICKET,
    "TicketResponse": {
        "ticket_id": 1301,
        "subject": "Internet Lento",
        "created_at": "2026-05-20 09:14",
        "end_date": "2026-05-25 09:14",
        "status_ticket": "Nuevo",
        "priority": "Normal",
    },
    "PendingInvoiceResponse": _INVOICE,
    "DiagnoseResponse": {
        "service_id": 101,
        "service_state": "active",
        "zone_id": 7,
        "zone_blocked": False,
        "open_tickets": [],
        "task_id": _FIGURES["task_id"],
        "sent": 4,
        "received": 4,
        "loss_percent": 0.0,
    },
    "ClientResponse": _CLIENT,
    "PingFigures": _FIGURES,
    "PingCreated": {"task_id": _FIGURES["task_id"]},
    "ZoneLimitData": {"max_tickets": 3, "active_tickets": 3},
    "PromiseCreatedResponse": {
        "service_id": 118,
        "invoice_id": 5021,
        "until": "2026-11-28",
        "amount_due": 40000.0,
        "reconnected": True,
    },
    "ReportReceivedResponse": {
        "service_id": 123,
        "invoice_id": 5026,
        "reference": "TRX-5501",
        "status": "in_review",
    },
    "Outage": {
        "outage_id": "r2-1764103267",
        "router_id": 2,
        "router_name": "RB-TENJO",
        "description": "Corte de fibra en la troncal de Tenjo",
        "since": "2026-11-25T20:41:07Z",
        "zone_ids": [3],
        "affected_count": 2,
    },
    "Plan": {"plan_id": 2, "name": "PLAN 10MB", "type": "PPPOE"},
    "PlanDetail": {
        "plan_id": 2,
        "name": "PLAN 10MB",
        "type": "PPPOE",
        "price": 40000.0,
        "download_speed": 10.0,
        "upload_speed": 2.0,
    },
    "AccountResponse": {
        "service_id": 118,
        "service_state": "suspended",
        "invoice_status": "Vencidas",
        "balance": 65000.0,
        "cut_off_date": "2026-05-05",
        "pending_invoices": [_INVOICE],
        "total_due": 65000.0,
        "as_of": "2026-05-20 09:14",
        "promise": None,
    },
    "VerificationResult": {
        "is_valid": True,
        "matched_fields": ["name", "address", "internet_plan_name"],
    },
}
# Where `data` may be one of several models, the one each action answers with.
BRANCHES: dict[str, str] = {
    Action.PING_PENDING: "PingPending",
    Action.STABLE_CONNECTION: "PingFigures",
    Action.INTERMITTENT_CONNECTION: "PingFigures",
    Action.NO_INTERNET: "PingFigures",
    Action.PING_FAILED: "PingFigures",
}
_NO_PING = {"task_id": None, "sent": None, "received": None, "loss_percent": None}
# What an action's `data` holds beside its model's example (its figures, its outcome).
ACTIONS: dict[str, Any] = {
    Action.CLIENT_VERIFICATION_FAILED: {
        "is_valid": False,
        "matched_fields": ["name", "address"],
        "debug": {
            "client_address": "V/ BUENOS AIRES MZ 3 CASA 7",
            "client_plan_name": "Plan Básico 8M",
            "resolved_plan_price": 65000.0,
        },
    },
    Action.NO_INTERNET: {"received": 0, "loss_percent": 100.0},
    Action.INTERMITTENT_CONNECTION: {"received": 2, "loss_percent": 50.0},
    Action.PING_PENDING: {"task_id": _FIGURES["task_id"]},
    Action.SERVICE_SUSPENDED: {
        "service_state": "suspended",
        "balance": 65000.0,
        "total_due": 65000.0,
        "pending_invoices": [_INVOICE],
        "next_step": "pay",
        **_NO_PING,
    },
    Action.SERVICE_CANCELLED: {"service_state": "cancelled", **_NO_PING},
    Action.ZONE_OUTAGE: {"outage_description": "Corte de fibra en el sector", **_NO_PING},
}
_SEARCH_META = {"total": 1, "has_more": False}
META: dict[str, Any] = {
    Action.CLIENT_FOUND: {"other_service_ids": [2285]},
    Action.CLIENTS_LISTED: None,
}
# The message an action's answer carries: its catalogue variant and figures, or None where
# the API answers `message: null`. Errors not listed carry their action's sentence.
MESSAGES: dict[str, tuple[str, dict[str, Any]] | None] = {
    Action.CLIENT_NOT_FOUND: ("lookup", {}),
    Action.INVALID_DOCUMENT: ("format", {}),
    Action.INVALID_PHONE: ("format", {}),
    Action.CLIENT_VERIFIED: ("verify", {}),
    Action.CLIENT_VERIFICATION_FAILED: ("mismatch", {}),
    Action.CLIENT_UPDATED: ("rest", {}),
    Action.ZONE_TICKET_LIMIT_REACHED: ("counts", {"zone_id": 7, "active": 3, "limit": 3}),
    Action.TICKET_ALREADY_OPEN: ("number", {"ticket_id": 1301}),
    Action.INSUFFICIENT_SCOPE: ("scope", {"scope": "clients:read"}),
    Action.UPSTREAM_UNAVAILABLE: ("rest", {}),
    Action.UPSTREAM_UNAUTHORIZED: ("rest", {}),
    Action.UPSTREAM_RATE_LIMITED: ("rest", {}),
    Action.STORE_UNAVAILABLE: ("store", {}),
    Action.STABLE_CONNECTION: ("ping", {}),
    Action.INTERMITTENT_CONNECTION: ("ping", {}),
    Action.NO_INTERNET: ("ping", {}),
    Action.PING_PENDING: ("ping", {}),
    Action.PING_FAILED: ("ping", {}),
    Action.SERVICE_CANCELLED: ("", {}),
    Action.SERVICE_SUSPENDED: ("", {}),
    Action.ZONE_OUTAGE: ("diagnosis", {}),
    Action.ERROR: ("internal", {}),
    Action.TICKET_NOT_FOUND: ("id", {"ticket_id": 1301}),
    Action.ZONE_MISMATCH: ("zones", {"service_id": 101, "zone_id": 7, "given": 3}),
    Action.INVOICE_NOT_PENDING: ("invoice", {"invoice_id": 9007}),
    Action.OUTAGE_IN_PROGRESS: (
        "held",
        {"service_id": 101, "outage_id": "r2-1764103267", "router_id": 2},
    ),
}
# Where the status or the operation chooses the message (and the data) an action's answer
# carries, as the API sends it: the generic `error` says what failed; the money routes' 201
# and 202 carry their sentences with figures.
_MONEY: dict[messages.Language, dict[str, str]] = {
    messages.Language.ES: {
        "until": "28 de noviembre",
        "day": "28 de noviembre",
        "amount": "$40.000",
    },
    messages.Language.EN: {"until": "November 28", "day": "November 28", "amount": "$40,000"},
}
BY_STATUS: dict[tuple[int, str], str] = {
    (405, Action.ERROR): "method",
    (413, Action.PAYLOAD_TOO_LARGE): "limit",
    (502, Action.PING_FAILED): "rest",
}
# The shipped limits a 413 names: MAX_BODY_BYTES, and RECEIPT_MAX_BYTES for a receipt.
_LIMITS = {"report_payment": 5242880}
BY_OPERATION: dict[tuple[str, int, str], str] = {
    ("list_clients", 500, Action.ERROR): "clients_list",
    ("search_clients", 400, Action.ERROR): "q_required",
    ("list_internet_plans", 200, Action.INTERNET_PLAN_NOT_FOUND): "none",
    ("promise_payment", 201, Action.PAYMENT_PROMISE_CREATED): "reactivated",
    ("report_payment", 202, Action.PAYMENT_REPORT_RECEIVED): "amount",
    ("promise_payment", 409, Action.PROMISE_NOT_ALLOWED): "broken",
    ("promise_payment", 409, Action.PROMISE_ALREADY_ACTIVE): "until",
    ("report_payment", 409, Action.PAYMENT_REPORT_DUPLICATE): "review",
    ("report_payment", 409, Action.PAYMENT_REPORT_NOT_ALLOWED): "too_many",
    ("report_payment", 413, Action.PAYLOAD_TOO_LARGE): "receipt",
    ("get_ping_result", 404, Action.PING_FAILED): "task",
    ("create_ticket", 404, Action.CLIENT_NOT_FOUND): "service",
    ("verify_client", 400, Action.CLIENT_VERIFICATION_FAILED): "few_fields",
    ("resolve_client", 400, Action.CLIENT_VERIFICATION_FAILED): "few_fields",
    ("update_client", 400, Action.CLIENT_UPDATE_FAILED): "nothing",
    ("update_client", 500, Action.CLIENT_UPDATE_FAILED): "failed",
    ("get_client_account", 502, Action.UPSTREAM_UNAVAILABLE): "balance",
}
# REST's refusal names the route to call; MCP's sentence is the catalogue's own.
_REST_VARIANTS: dict[str, str] = {
    Action.VERIFICATION_REQUIRED: "rest",
    Action.IDEMPOTENCY_KEY_REUSED: "rest",
    Action.IDEMPOTENCY_KEY_IN_PROGRESS: "rest",
}
_NO_DATA = {("list_internet_plans", Action.INTERNET_PLAN_NOT_FOUND)}
_ERROR_DATA: dict[str, Any] = {
    Action.INSUFFICIENT_SCOPE: {"required": "clients:read"},
    Action.ZONE_MISMATCH: {"zone_id": 7},
    Action.INVOICE_NOT_PENDING: {"invoice_id": 9007},
    Action.PROMISE_NOT_ALLOWED: {"reason": "broken_promise", "allowed_from": "2026-11-28"},
    Action.PROMISE_ALREADY_ACTIVE: {"until": "2026-11-28", "invoice_id": 5021},
    Action.PAYMENT_REPORT_DUPLICATE: {
        "service_id": 123,
        "invoice_id": 5026,
        "reference": "TRX-5501",
        "status": "in_review",
    },
    Action.PAYMENT_REPORT_NOT_ALLOWED: {"reason": "too_many_reports", "allowed_from": "2026-11-28"},
}
_INFO = {
    Action.ZONE_TICKET_LIMIT_REACHED,
    Action.TICKET_ALREADY_OPEN,
    Action.PING_PENDING,
    Action.SERVICE_CANCELLED,
    Action.SERVICE_SUSPENDED,
    Action.ZONE_OUTAGE,
}


def made_from(schema: Any, components: dict[str, Any], depth: int = 0) -> Any:
    """A value the schema accepts: its model's example, or one made from its parts."""
    if not isinstance(schema, dict) or depth > 8:
        return None
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name in MODELS:
            return copy.deepcopy(MODELS[name])
        return made_from(components.get(name), components, depth + 1)
    if schema.get("examples"):
        return schema["examples"][0]
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for union in ("anyOf", "oneOf"):
        if union in schema:
            branches = [b for b in schema[union] if b.get("type") != "null"]
            return made_from(branches[0], components, depth + 1) if branches else None
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {name: made_from(prop, components, depth + 1) for name, prop in props.items()}
    if kind == "array":
        return [made_from(schema.get("items", {}), components, depth + 1)]
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 1))
    if kind == "boolean":
        return True
    if kind == "string":
        return "2026-06-05" if schema.get("format") == "date" else "texto"
    return None


def _branch(schema: Any, action: str | None) -> Any:
    """The branch of a `data` that may be several models that this action answers."""
    wanted = BRANCHES.get(action or "")
    if not isinstance(schema, dict) or wanted is None:
        return schema
    for branch in schema.get("anyOf", []):
        if branch.get("$ref", "").endswith(f"/{wanted}"):
            return branch
    return schema


def _message(
    action: str | None, ok: bool, language: messages.Language, status: int, operation: str
) -> str | None:
    if action is None:
        return None
    variant = BY_OPERATION.get((operation, status, action), BY_STATUS.get((status, action)))
    if variant is not None:
        limit = _LIMITS.get(operation, 65536)
        return messages.text(
            action, variant, language=language, limit=limit, service_id=101, **_MONEY[language]
        )
    chosen = MESSAGES.get(action, None if ok else (_REST_VARIANTS.get(action, ""), {}))
    if chosen is None:
        return None
    variant, params = chosen
    return messages.text(action, variant, language=language, **params)


def envelope_example(
    action: str | None,
    status: int,
    data_schema: Any,
    components: dict[str, Any],
    language: messages.Language,
    operation: str = "",
) -> dict[str, Any]:
    """One whole answer of `action` with this status (of the operation `operation`), its
    `data` fitting `data_schema`."""
    success = 200 <= status < 300
    ok = success and action != Action.PING_FAILED
    kind = "info" if action in _INFO else "success" if ok else "error"
    if success:
        data = made_from(_branch(data_schema, action), components)
        if isinstance(data, dict) and action in ACTIONS:
            data.update(ACTIONS[action])
        if action == Action.CLIENT_NOT_FOUND:
            data = []
        if (operation, action) in _NO_DATA:
            data = None
    else:
        data = _ERROR_DATA.get(action) if action is not None else None
        if action == Action.ZONE_TICKET_LIMIT_REACHED:
            data = MODELS["ZoneLimitData"]
        elif action == Action.TICKET_ALREADY_OPEN:
            data = made_from({"$ref": "#/components/schemas/OpenTicketResponse"}, components)
        elif action == Action.OUTAGE_IN_PROGRESS:
            data = copy.deepcopy(MODELS["Outage"])
    meta = META.get(action) if action is not None else None
    if action in (Action.CLIENTS_LISTED, Action.CLIENT_NOT_FOUND) and success:
        meta = _SEARCH_META
    return {
        "ok": ok,
        "type": kind,
        "action": action,
        "data": data,
        "message": _message(action, ok, language, status, operation),
        "meta": meta,
    }
