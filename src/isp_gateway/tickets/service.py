"""Tickets (spec 4.7-4.11, DECISIONS.md "Tickets", BEYOND.md): subjects, the zone cap,
creation, lookup, a client's open tickets and the duplicate guard.

The active tickets of every zone are one cached sweep (`CachedResource` "tickets:active":
every page of the active states, refresh ahead, single flight, stale-if-error, shared through
the store). Reads (a client's tickets, diagnose's zone figures) come from it with no upstream
call. Creation is one atomic step per zone under the store's lock (so the Redis store makes it
hold across workers): the client record first (outside the lock; its zone is the one capped,
CALLERS.md 2), then under the lock the sweep at most ZONE_SWEEP_FRESH_SECONDS old (shared
with the zone status; one interactive load across workers when older), the cap, the
duplicate guard, create. A created ticket is patched into the sweep at once (the cache's
patch log, shared through the store), so every worker and the next check count it.

A POST may create the ticket and its outcome still be lost: its answer times out, or the
store (or the worker) goes away before the ticket is recorded. So before each POST two marks
are written, on a replica too under Redis Sentinel (`set_replicated`): the request's
fingerprint as "unconfirmed" and the zone as "posting", each with the highest ticket id seen
before it; they are removed once the outcome is recorded. A mark left behind makes the next
creation in the zone read the upstream's list now: the zone's newer tickets join the shared
sweep (the cap counts them), and an identical request (same Idempotency-Key or not) answers
with its ticket instead of creating a second. A POST that got no answer at all may still be
carried out by a slow backend after the gateway gave up: for 3 upstream timeouts and 1 s from
it (creation.py, settle_seconds), while its ticket does not show, an identical request answers
503 `outcome_pending` and the zone's other creations 503 `zone_busy`, nothing sent.

One write path for REST and MCP: `order` (or `order_for_service`, whose zone and technician
come from the client record) checks the subject, and `create(order, idempotency_key)` runs
the creation through the store's idempotency (kit/idempotency.py) and answers the decided
answer (status and envelope, kit/answers.py): the ticket, or a final refusal (the zone cap,
the duplicate), replayed as it was for a repeat with the key. Other refusals raise typed
errors (ZoneMismatch, TicketCreationFailed, ...). Each outcome is counted (metrics) and
audited (`ticket_create`) here, where it is decided.

The rooms: errors.py (the refusals), active.py (the swept list), zones.py (the zone count and
the marks), creation.py (the locked step), service.py (this: reads and the write path).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any

from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.kit.answers import Answer, success
from isp_gateway.kit.cache import CachedResource
from isp_gateway.kit.errors import InvalidInput, NotFound, ServiceError, UpstreamUnavailable
from isp_gateway.kit.idempotency import Idempotency, fingerprint, refusal_told
from isp_gateway.tickets.active import ActiveTickets
from isp_gateway.tickets.creation import TicketCreation, TicketOrder
from isp_gateway.tickets.errors import (
    FINAL_REFUSALS,
    OutageInProgress,
    TicketAlreadyOpen,
    ZoneLimitReached,
    ZoneMismatch,
    ticket_outcome,
)
from isp_gateway.tickets.schemas import CreateTicketRequest
from isp_gateway.tickets.subjects import SubjectCatalogue
from isp_gateway.tickets.views import ticket_answer, ticket_detail, ticket_view
from isp_gateway.tickets.zones import ZoneCounter
from isp_gateway.upstream import tickets as upstream

if TYPE_CHECKING:
    from isp_gateway.clients.service import ClientService
    from isp_gateway.observability.metrics import Metrics
    from isp_gateway.outages.service import OutageService
    from isp_gateway.parts import Parts

log = logging.getLogger("isp_gateway.tickets")

# The zone and technician ids of an order whose zone and technician come from the client
# record (`order_for_service`): replaced by the record's before anything is counted, locked
# or sent.
FROM_RECORD = 1
# An empty sweep is checked against this many of the newest tickets the last whole one listed.
SWEEP_SAMPLE = 3
SWEEP_SAMPLE_KEY = "tickets:active:sample"


class TicketService:
    def __init__(
        self,
        parts: Parts,
        *,
        clients: ClientService,
        outages: OutageService,
        metrics: Metrics | None = None,
    ) -> None:
        store, settings = parts.store, parts.settings
        self.store, self.gateway, self.settings = store, parts.gateway, settings
        self.audit, self.metrics, self.clients = parts.audit, metrics, clients
        self.active: CachedResource[ActiveTickets] = parts.lists.resource(
            "tickets:active",
            self._sweep,
            ActiveTickets.derive,
            ttl=settings.ACTIVE_TICKETS_CACHE_SECONDS,
            patch=ActiveTickets.patch,
        )
        self.catalogue = SubjectCatalogue.load(settings.TICKET_SUBJECTS_FILE)
        self.states = list(settings.ACTIVE_TICKET_STATES)
        self.zones = ZoneCounter(parts, active=self.active, states=self.states)
        self.creation = TicketCreation(
            parts, clients=clients, outages=outages, zones=self.zones, catalogue=self.catalogue
        )
        timeout = settings.UPSTREAM_TIMEOUT_SECONDS
        zone_lock = self.creation.zone_lock_seconds
        # A repeat of a creation with its Idempotency-Key waits for the first, whose zone
        # step it outlives.
        self.idempotency = Idempotency(
            store,
            "tickets",
            ttl=settings.IDEMPOTENCY_TTL_SECONDS,
            lock_seconds=zone_lock + self.creation.zone_wait_seconds + 5,
            wait_seconds=max(5.0, timeout),
        )

    async def start(self) -> None:
        """Keep the sweep of active tickets warm in the background."""
        self.active.start()

    async def aclose(self) -> None:
        """Stop the sweep's refresh job and loads in flight."""
        await self.active.aclose()

    async def _sweep(self, background: bool) -> list[dict[str, Any]]:
        tickets = await upstream.list_in_states(self.gateway, self.states, background=background)
        if tickets:
            # The newest ids a whole sweep listed (no expiry: they outlive the cached copy
            # and a restart), for the day the list comes back empty.
            listed = sorted((t.ticket_id for t in tickets), reverse=True)[:SWEEP_SAMPLE]
            if await self.store.get(SWEEP_SAMPLE_KEY) != listed:
                await self.store.set(SWEEP_SAMPLE_KEY, listed)
        else:
            await self._confirm_empty()
        return [t.model_dump() for t in tickets]

    async def _confirm_empty(self) -> None:
        """An empty sweep is taken only when the tickets the last whole one listed are no
        longer active, each asked on its own; one still open makes it a failed read
        (UpstreamUnavailable: CALLERS.md 2). A 200 with `[]`, or a page counting 0, is no
        proof that every ticket closed: taken, it would lift every zone's cap, hide open
        tickets from the duplicate guard and tell a bot the customer has none."""
        listed = await self.store.get(SWEEP_SAMPLE_KEY)
        for ticket_id in listed if isinstance(listed, list) else []:
            ticket = await upstream.fetch(self.gateway, int(ticket_id))
            # An unreadable state counts as active, as the zone count takes it (zones.py).
            if ticket is not None and (ticket.state is None or ticket.state in self.states):
                log.warning(
                    "active tickets read empty while ticket %d is still active: "
                    "a failed read, not taken",
                    ticket.ticket_id,
                )
                raise UpstreamUnavailable()
        if listed:
            await self.store.delete(SWEEP_SAMPLE_KEY)

    # -- subjects ----------------------------------------------------------------------

    def subjects(self) -> dict[str, Any]:
        return self.catalogue.as_data()

    def _subject(self, subject: str) -> tuple[str, int]:
        """The catalogue's spelling of a subject and its priority, or a 400."""
        name = self.catalogue.canonical(subject)
        priority = self.catalogue.priority_of(name) if name is not None else None
        if name is not None and priority is not None:
            return name, priority
        hint = self.catalogue.closest(subject)
        failed = Action.TICKET_CREATION_FAILED
        message = messages.say(failed, "unknown_subject", subject=subject)
        if hint is not None:
            message += messages.say(failed, "closest", hint=hint)
        raise InvalidInput(
            message,
            action=failed,
            variant="unknown_subject",
            meta={"reason": "unknown_subject", "closest": hint},
        )

    # -- reads ---------------------------------------------------------------------------

    async def zone_status(self, zone_id: int, *, fresh: bool = True) -> dict[str, Any]:
        """The spec's zone-blocked figures. The endpoint counts from the same recent sweep as
        creation (the spec's answer is the cap's own); diagnose reads the cached sweep."""
        return await self.zones.status(zone_id, fresh=fresh)

    async def _require_client(self, service_id: int) -> None:
        """404 for a service the clients source confirms unknown (a miss in the cached list
        asks the upstream for that one service, with the lookups' memory of misses). When
        the clients source cannot answer, it raises: never a guess. (Creation reads the
        record itself for its zone: creation.py.)"""
        client = await self.clients.get_client(service_id) if service_id > 0 else None
        if client is None:
            raise NotFound(
                action=Action.CLIENT_NOT_FOUND, variant="service", params={"service_id": service_id}
            )

    async def open_tickets(self, service_id: int) -> tuple[list[dict[str, Any]], bool]:
        """The service's active tickets from the cached sweep, newest first, and whether the
        sweep is a stale copy. No client check: for callers that made it (diagnose)."""
        snapshot = await self.active.get()
        return [ticket_view(t) for t in snapshot.value.for_service(service_id)], snapshot.stale

    async def client_tickets(self, service_id: int) -> tuple[list[dict[str, Any]], bool]:
        await self._require_client(service_id)
        return await self.open_tickets(service_id)

    async def get(self, ticket_id: int) -> dict[str, Any]:
        ticket = await upstream.fetch(self.gateway, ticket_id) if ticket_id > 0 else None
        if ticket is None:
            raise NotFound(
                action=Action.TICKET_NOT_FOUND, variant="id", params={"ticket_id": ticket_id}
            )
        technician_id = ticket.technician_id
        if technician_id is None:
            technician_id = await self.store.get(f"tickets:technician:{ticket_id}")
        return ticket_detail(ticket, technician_id)

    # -- the write path ------------------------------------------------------------------

    async def order(self, request: CreateTicketRequest) -> TicketOrder:
        """The request checked against the subject catalogue (a 400 before any upstream
        call, counted and audited as `failed`), with its priority and fingerprint."""
        try:
            subject, priority = self._subject(request.subject)
        except ServiceError:
            # The caller's own words are not audited: not a catalogue subject, they are text.
            details = {"zone_id": request.zone_id, "reason": "unknown_subject"}
            self._refusal("failed", request.service_id, details)
            raise
        if subject != request.subject:
            request = request.model_copy(update={"subject": subject})
        return TicketOrder(request, priority, fingerprint(request.model_dump(mode="json")))

    async def order_for_service(
        self, service_id: int, subject: str, description: str
    ) -> TicketOrder:
        """An order whose zone and technician are the client record's (CALLERS.md 5: an
        agent names neither), read once, in the creation step; DEFAULT_TECHNICIAN_ID
        stands in for a record without a technician."""
        request = CreateTicketRequest(
            service_id=service_id,
            subject=subject,
            description=description,
            technician_id=FROM_RECORD,
            zone_id=FROM_RECORD,
        )
        order = await self.order(request)
        return TicketOrder(order.request, order.priority, order.fingerprint, from_record=True)

    async def create(self, order: TicketOrder, idempotency_key: str | None = None) -> Answer:
        """Open the ticket: the created one (or the one an unconfirmed creation of the same
        request did open) as a 201 answer, or a final refusal as its answer; other refusals
        raise. With `idempotency_key`, a repeat gets the first final answer as it was (an
        idempotent replay is no new outcome: neither counted nor audited)."""

        async def produce() -> Answer:
            refused = partial(self._refused, order)
            ticket = await refusal_told(self.creation.create(order), refused)
            zone_id = ticket.zone_id if order.from_record else order.request.zone_id
            details = {"ticket_id": ticket.ticket_id, "zone_id": zone_id}
            await self._decided("created", order.request.service_id, self._with(order, details))
            return Answer(201, success(Action.TICKET_CREATED, ticket_answer(ticket)))

        return await self.idempotency.run(
            idempotency_key, order.fingerprint, produce, final=FINAL_REFUSALS
        )

    @staticmethod
    def _with(order: TicketOrder, details: dict[str, Any]) -> dict[str, Any]:
        """Audit details with the subject: the catalogue's word (never the description)."""
        return {"subject": order.request.subject, **details}

    async def _refused(self, order: TicketOrder, refusal: ServiceError) -> None:
        outcome = ticket_outcome(refusal)
        if outcome is None:
            return
        details: dict[str, Any] = {"zone_id": None if order.from_record else order.request.zone_id}
        if isinstance(refusal, ZoneLimitReached):
            details.update(refusal.data or {})
        elif isinstance(refusal, TicketAlreadyOpen):
            details["ticket_id"] = (refusal.data or {}).get("ticket_id")
        elif isinstance(refusal, ZoneMismatch):
            details["record_zone_id"] = (refusal.data or {}).get("zone_id")
        elif isinstance(refusal, OutageInProgress):
            # The router, not the outage id: the audit masks its run of digits.
            details["router_id"] = (refusal.data or {}).get("router_id")
        else:
            details["reason"] = (refusal.meta or {}).get("reason", refusal.action)
        details = self._with(order, details)
        if details.get("reason") == "outcome_unknown":
            # The POST went out and its answer was lost: the ticket may exist, a write.
            await self._decided(outcome, order.request.service_id, details)
        else:
            self._refusal(outcome, order.request.service_id, details)

    async def _decided(self, outcome: str, service_id: int, details: dict[str, Any]) -> None:
        """A creation that made a ticket, or may have: counted in the metrics, then audited
        one by one in the writes' stream (`ticket_create`, CALLERS.md 4)."""
        if self.metrics is not None:
            self.metrics.ticket(outcome)
        await self.audit.record("ticket_create", outcome, service_id=service_id, details=details)

    def _refusal(self, outcome: str, service_id: int, details: dict[str, Any]) -> None:
        """A creation refused before anything was written upstream (the subject, the zone,
        its cap, a ticket already open, an outage, a backend that said no or was not
        reached): counted in the metrics, and in the audit as every refusal is, one event a
        caller, outcome, service, reason and minute (CALLERS.md 6), so a loop of refused
        creations never pushes the writes out of the audit."""
        if self.metrics is not None:
            self.metrics.ticket(outcome)
        # Only a failure's reason splits its group: the other outcomes name the rule itself.
        reason = (details.get("reason") or "") if outcome == "failed" else ""
        self.audit.count_about("ticket_create", outcome, service_id, details, reason)
