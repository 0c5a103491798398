"""Every `action` the API answers (the envelope's `action`, spec 2.1): each written once.

Routers, services, the OpenAPI error documentation (web/openapi.py, web/envelope.py), the
MCP tools' sentences and the message catalogue (kit/messages.py) all name an action through
this enum. A `StrEnum`: a member is its value wherever a string is expected (JSON, equality,
the audit), so the wire format is exactly the spec's.
"""

from __future__ import annotations

from enum import StrEnum, unique


@unique
class Action(StrEnum):
    # -- the spec's generic error and the service's own refusals --------------------------
    ERROR = "error"
    VALIDATION_ERROR = "validation_error"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    RATE_LIMITED = "rate_limited"
    INSUFFICIENT_SCOPE = "insufficient_scope"
    VERIFICATION_REQUIRED = "verification_required"
    STORE_UNAVAILABLE = "store_unavailable"
    # A list the answer needs is still loading at start-up (its first load).
    LOADING = "loading"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    IDEMPOTENCY_KEY_IN_PROGRESS = "idempotency_key_in_progress"
    # -- the upstream ----------------------------------------------------------------------
    UPSTREAM_UNAVAILABLE = "upstream_unavailable"
    UPSTREAM_UNAUTHORIZED = "upstream_unauthorized"
    UPSTREAM_RATE_LIMITED = "upstream_rate_limited"
    # The spec's own answer when the upstream refuses our key on a client fetch (spec 6.5).
    UPSTREAM_REFUSED_CLIENT_FETCH = "CLIENT_NOT_FOUND"
    # -- clients ---------------------------------------------------------------------------
    CLIENTS_LISTED = "clients_listed"
    CLIENT_FOUND = "client_found"
    CLIENT_NOT_FOUND = "client_not_found"
    INVALID_DOCUMENT = "invalid_document"
    INVALID_PHONE = "invalid_phone"
    INVALID_SERVICE_ID = "invalid_service_id"
    CLIENT_VERIFIED = "client_verified"
    CLIENT_VERIFICATION_FAILED = "client_verification_failed"
    CLIENT_VERIFICATION_LOCKED = "client_verification_locked"
    # CALLERS.md 6: a caller past its distinct resolves an hour (CALLER_RESOLVES_PER_HOUR).
    IDENTITY_RATE_LIMITED = "identity_rate_limited"
    CLIENT_AMBIGUOUS = "client_ambiguous"
    CLIENT_UPDATED = "client_updated"
    CLIENT_UPDATE_FAILED = "client_update_failed"
    # -- accounts --------------------------------------------------------------------------
    ACCOUNT_FOUND = "account_found"
    PAYMENT_METHODS_LISTED = "payment_methods_listed"
    # -- payments: promises and reports (MONEY.md) -----------------------------------------
    PAYMENT_PROMISE_CREATED = "payment_promise_created"
    PROMISE_NOT_ALLOWED = "promise_not_allowed"
    PROMISE_ALREADY_ACTIVE = "promise_already_active"
    INVOICE_NOT_PENDING = "invoice_not_pending"
    PAYMENT_PROMISE_FAILED = "payment_promise_failed"
    PAYMENT_REPORT_RECEIVED = "payment_report_received"
    PAYMENT_REPORT_DUPLICATE = "payment_report_duplicate"
    PAYMENT_REPORT_NOT_ALLOWED = "payment_report_not_allowed"
    UNSUPPORTED_RECEIPT = "unsupported_receipt"
    # A report's body that did not arrive within RECEIPT_UPLOAD_TIMEOUT_SECONDS (408).
    UPLOAD_TIMEOUT = "upload_timeout"
    PAYMENT_REPORT_FAILED = "payment_report_failed"
    # -- tickets ---------------------------------------------------------------------------
    TICKET_SUBJECTS_LISTED = "ticket_subjects_listed"
    TICKET_FOUND = "ticket_found"
    TICKET_NOT_FOUND = "ticket_not_found"
    TICKET_CREATED = "ticket_created"
    TICKET_CREATION_FAILED = "ticket_creation_failed"
    TICKET_ALREADY_OPEN = "ticket_already_open"
    TICKETS_LISTED = "tickets_listed"
    ZONE_TICKET_LIMIT_REACHED = "zone_ticket_limit_reached"
    ZONE_MISMATCH = "zone_mismatch"
    # -- network: a ping and its outcome ----------------------------------------------------
    PING_CREATED = "ping_created"
    PING_PENDING = "ping_pending"
    PING_FAILED = "ping_failed"
    STABLE_CONNECTION = "stable_connection"
    INTERMITTENT_CONNECTION = "intermittent_connection"
    NO_INTERNET = "no_internet"
    # -- diagnose --------------------------------------------------------------------------
    SERVICE_CANCELLED = "service_cancelled"
    SERVICE_SUSPENDED = "service_suspended"
    ZONE_OUTAGE = "zone_outage"
    # -- outages ---------------------------------------------------------------------------
    OUTAGES_LISTED = "outages_listed"
    OUTAGE_IN_PROGRESS = "outage_in_progress"
    # -- plans -----------------------------------------------------------------------------
    INTERNET_PLANS_LISTED = "internet_plans_listed"
    INTERNET_PLAN_FOUND = "internet_plan_found"
    INTERNET_PLAN_NOT_FOUND = "internet_plan_not_found"
    # -- audit -----------------------------------------------------------------------------
    AUDIT_LISTED = "audit_listed"
