"""The lookup door of the edge (web/edge.py), for the three client lookups, the bots'
hottest calls.

FastAPI's routing, dependency resolution and middleware stack cost several times more than
a lookup in the warm index. This door answers only the sure case: a GET on a lookup route
with a credential that passes (a Bearer token verified in full, once, and not expired, or a
current API key holding `clients:read`, within its own rate) and a hit in the fresh index;
a refused credential gets the regular route's 401 here too. Everything else goes on,
untouched, to the rest of the edge and the regular routes, which document the endpoints and
apply every rule (validation, scopes, misses, the upstream, staleness, errors).

While the store is away, a hit in this process's fresh index is still answered (the cache
serves its local copy: lookups keep answering through a Redis failover); a store failure
here (an API key's rate) is not: the request goes on and the regular stack gives its 503
`store_unavailable`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from isp_gateway.auth.credentials import Gatekeeper, valid_end_user
from isp_gateway.auth.edge import Denials, Refused, credential, refusal
from isp_gateway.auth.keys import CLIENTS_READ, enforce_key_rate
from isp_gateway.kit.errors import Locked, StoreUnavailable
from isp_gateway.web.doors import EdgeAnswer, EdgeRequest, EdgeRoute

if TYPE_CHECKING:
    from isp_gateway.clients.service import ClientService

PREFIX = "/api/v1/clients/"
# The scopes the lookup routes ask (clients/router.py: `Scoped(CLIENTS_READ)`).
_SCOPES = (CLIENTS_READ,)
KINDS = frozenset({"by-document", "by-phone", "by-service-id"})
# The regular routes' templates, named in the scope for the request metrics.
TEMPLATES = {
    "by-document": PREFIX + "by-document/{document}",
    "by-phone": PREFIX + "by-phone/{phone}",
    "by-service-id": PREFIX + "by-service-id/{service_id}",
}
# The access log's path for a lookup, masked without a regex: documents and phones never
# reach a log; a service id is not personal and stays (as logs.mask_path leaves it).
MASKED = {
    "by-document": PREFIX + "by-document/***",
    "by-phone": PREFIX + "by-phone/***",
}


def _lookup(request: EdgeRequest) -> tuple[str, str] | None:
    """(kind, value) of a lookup the door may answer, else None."""
    if request.method != "GET":
        return None
    path = request.path
    if not path.startswith(PREFIX):
        return None
    kind, sep, value = path[len(PREFIX) :].partition("/")
    if not sep or kind not in KINDS or not value or "/" in value:
        return None
    return kind, value


class _WithClients(Protocol):
    @property
    def clients(self) -> ClientService: ...


class EdgeRuntime(Gatekeeper, Protocol):
    """What the door reads of the running service (services.Runtime is one): the
    credentials' parts and the client lookups."""

    @property
    def services(self) -> _WithClients: ...


class LookupDoor:
    """Answers a sure lookup hit, or a lookup's refused credential (see the module)."""

    def __init__(
        self, runtime_getter: Callable[[], EdgeRuntime], denials: Denials | None = None
    ) -> None:
        self.runtime_getter = runtime_getter
        # The caller's door's 403s, given here on a lookup (None: left to that door).
        self.denials = denials

    async def answer(self, request: EdgeRequest, route: EdgeRoute | None) -> EdgeAnswer | None:
        candidate = _lookup(request)
        if candidate is None:
            return None
        kind, value = candidate
        runtime = self.runtime_getter()
        found = credential(runtime, request)
        template = TEMPLATES[kind]
        logged = MASKED.get(kind)
        if isinstance(found, Refused):
            return refusal(template, logged)
        if not isinstance(found, str) and not found.allows(CLIENTS_READ):
            if self.denials is None:
                return None  # the caller's door answers the 403
            return await self.denials.deny(runtime, request, found, _SCOPES, template, logged)
        end_user = request.end_user
        if end_user is not None and not valid_end_user(end_user):
            return None  # the regular route answers it 422 validation_error
        try:
            body = await runtime.services.clients.fresh_hit_body(kind, value)
            if body is None:
                return None
            if not isinstance(found, str) and found.rate_per_minute is not None:
                await enforce_key_rate(runtime.store, found)
        except (Locked, StoreUnavailable):
            return None  # the regular route counts it again and answers 429 (or 503)
        return EdgeAnswer(200, body, template, type_first=True, logged=logged)
