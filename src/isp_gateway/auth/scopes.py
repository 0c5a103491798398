"""What a credential may do (CALLERS.md 3): the scopes, and the one check of a scope."""

from __future__ import annotations

from collections.abc import Iterable

from isp_gateway.kit.actions import Action
from isp_gateway.kit.errors import ServiceError

# -- scopes ---------------------------------------------------------------------------------

CLIENTS_READ = "clients:read"  # list, search, lookups
CLIENTS_VERIFY = "clients:verify"  # verify, resolve
CLIENTS_WRITE = "clients:write"  # PUT
ACCOUNTS_READ = "accounts:read"  # account, payment methods
TICKETS_READ = "tickets:read"  # subjects, get ticket, zone status, a client's tickets
TICKETS_WRITE = "tickets:write"  # create
NETWORK_PING = "network:ping"  # pings, diagnose
PLANS_READ = "plans:read"
AUDIT_READ = "audit:read"
OUTAGES_READ = "outages:read"  # the general outages now active
PAYMENTS_PROMISE = "payments:promise"  # a payment promise (reconnects a suspended service)
PAYMENTS_REPORT = "payments:report"  # a payment report with its receipt, for staff review
ALL_SCOPES = "*"  # every scope; the spec's JWT user has it

SCOPES: tuple[str, ...] = (
    CLIENTS_READ,
    CLIENTS_VERIFY,
    CLIENTS_WRITE,
    ACCOUNTS_READ,
    TICKETS_READ,
    TICKETS_WRITE,
    NETWORK_PING,
    PLANS_READ,
    AUDIT_READ,
    OUTAGES_READ,
    PAYMENTS_PROMISE,
    PAYMENTS_REPORT,
)
KNOWN_SCOPES = frozenset((*SCOPES, ALL_SCOPES))
# What the spec's JWT user holds.
JWT_SCOPES = frozenset({ALL_SCOPES})


def has_scope(scopes: Iterable[str], required: str) -> bool:
    held = scopes if isinstance(scopes, frozenset | set) else frozenset(scopes)
    return ALL_SCOPES in held or required in held


class InsufficientScope(ServiceError):
    """The credential is valid but lacks the route's scope (CALLERS.md 3)."""

    status_code = 403
    action = Action.INSUFFICIENT_SCOPE

    def __init__(self, required: str) -> None:
        super().__init__(variant="scope", params={"scope": required}, data={"required": required})
        self.required = required


def require_scope(scopes: Iterable[str], required: str) -> None:
    """Raise 403 `insufficient_scope` (`data.required`) unless `scopes` grant `required`."""
    if not has_scope(scopes, required):
        raise InsufficientScope(required)
