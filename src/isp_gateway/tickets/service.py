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
with its ticket instead of creating a second.

Creation speaks no HTTP: `order` checks the subject, `create` returns the created `Ticket` or
raises a typed refusal (ZoneLimitReached, TicketAlreadyOpen, ZoneMismatch,
TicketCreationFailed, ...), and the router renders it (with `idempotency.py` for a key). Each
outcome is counted (metrics) and audited (`ticket_create`) here, where it is decided.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from isp_gateway.kit import deadline
from isp_gateway.kit.cache import CachedResource
from isp_gateway.kit.errors import (
    InvalidInput,
    NotFound,
    ServiceError,
    StoreUnavailable,
    UpstreamError,
    UpstreamRateLimited,
    UpstreamUnauthorized,
    UpstreamUnavailable,
)
from isp_gateway.kit.idempotency import Idempotency, fingerprint
from isp_gateway.store import LockTimeout
from isp_gateway.tickets.calendar import BusinessCalendar
from isp_gateway.tickets.schemas import CreateTicketRequest
from isp_gateway.tickets.subjects import SubjectCatalogue
from isp_gateway.tickets.views import ticket_detail, ticket_view
from isp_gateway.upstream import tickets as upstream
from isp_gateway.upstream.tickets import (
    OUR_MOMENT,
    STATE_LABELS,
    NewTicket,
    Ticket,
    TicketRejected,
)

if TYPE_CHECKING:
    from isp_gateway.clients.service import ClientService
    from isp_gateway.observability.metrics import Metrics
    from isp_gateway.parts import Parts

log = logging.getLogger("isp_gateway.tickets")

# The upstream's support department (`departamento` / `departamentos_default`).
DEPARTMENT = "Soporte Técnico"
# Tickets this service created are counted for this long even when the upstream's list does
# not show them yet (an eventually consistent list must not let the cap be overrun).
RECENT_SECONDS = 300.0
# The upstream names a ticket's technician; the id we sent is remembered for lookups.
TECHNICIAN_MEMORY_SECONDS = 30 * 86400.0


# Of the answer's 2 s margin past the deadline, what a ticket's POST may use.
POST_MARGIN_SECONDS = 1.0


def _within_deadline(seconds: float) -> float:
    """`seconds`, or less: what the request's deadline leaves (never below nothing)."""
    current = deadline.current()
    return seconds if current is None else max(0.0, min(seconds, current.left()))


class ZoneLimitReached(ServiceError):
    status_code = 409
    type = "info"
    action = "zone_ticket_limit_reached"


class TicketCreationFailed(ServiceError):
    status_code = 502
    action = "ticket_creation_failed"
    default_message = "The ticket could not be created"


class ZoneMismatch(ServiceError):
    status_code = 422
    action = "zone_mismatch"


class TicketAlreadyOpen(ServiceError):
    status_code = 409
    type = "info"
    action = "ticket_already_open"


# Final answers are replayed for an Idempotency-Key's lifetime (DECISIONS.md: "returns the
# first answer"): a created ticket, and these refusals. An unknown service (404) is not final,
# nor is a failure (upstream down, outcome unknown): a repeat with the key tries again, and
# reconciles a POST whose answer was lost.
FINAL_REFUSALS: tuple[type[ServiceError], ...] = (ZoneLimitReached, TicketAlreadyOpen)


@dataclass(frozen=True)
class TicketOrder:
    """A creation request checked against the subject catalogue: the request with the
    catalogue's spelling of its subject, that subject's priority, and the request's
    fingerprint (its idempotency and the memory of an unconfirmed creation)."""

    request: CreateTicketRequest
    priority: int
    fingerprint: str


def ticket_outcome(error: ServiceError) -> str | None:
    """The outcome (metrics, audit) a creation's refusal is, or None when it is no outcome
    of a creation (an unknown service, a caller's malformed request)."""
    if isinstance(error, ZoneLimitReached):
        return "zone_limit"
    if isinstance(error, TicketAlreadyOpen):
        return "duplicate"
    if isinstance(error, ZoneMismatch):
        return "zone_mismatch"
    if isinstance(error, StoreUnavailable) or error.action == "ticket_creation_failed":
        return "failed"
    return None


@dataclass
class ZoneCount:
    active: int
    tickets: list[Ticket]  # every active ticket, all zones (for reconciliation and the guard)


def _newest_first(ticket: Ticket) -> tuple[str, int]:
    return ticket.created_at or "", ticket.ticket_id


class ActiveTickets:
    """The swept active tickets of every zone, indexed by id, service and zone. Built once
    per load; tickets created here are patched in (`add`)."""

    def __init__(self, tickets: list[Ticket]) -> None:
        self.by_id: dict[int, Ticket] = {}
        self.by_service: dict[int, list[Ticket]] = {}
        self.per_zone: dict[int, int] = {}
        for ticket in tickets:
            self.add(ticket)

    @classmethod
    def derive(cls, value: Any) -> ActiveTickets:
        return cls([Ticket.model_validate(row) for row in value or []])

    @staticmethod
    def patch(index: ActiveTickets, item: Any) -> ActiveTickets:
        index.add(Ticket.model_validate(item))
        return index

    def add(self, ticket: Ticket) -> None:
        old = self.by_id.get(ticket.ticket_id)
        if old is not None:
            # Already listed (a reload carried a patch its fetch had seen): no double count.
            return
        self.by_id[ticket.ticket_id] = ticket
        if ticket.zone_id is not None:
            self.per_zone[ticket.zone_id] = self.per_zone.get(ticket.zone_id, 0) + 1
        if ticket.service_id is not None:
            listed = self.by_service.setdefault(ticket.service_id, [])
            listed.append(ticket)
            listed.sort(key=_newest_first, reverse=True)

    def for_service(self, service_id: int) -> list[Ticket]:
        """The service's active tickets, newest first (higher id first on a tie)."""
        return list(self.by_service.get(service_id, ()))


class TicketService:
    def __init__(
        self, parts: Parts, clients: ClientService, metrics: Metrics | None = None
    ) -> None:
        self.store, self.gateway = parts.store, parts.gateway
        self.settings = settings = parts.settings
        self.audit, self.stopping = parts.audit, parts.stopping
        self.metrics = metrics
        self.clients = clients
        self.active: CachedResource[ActiveTickets] = parts.lists.resource(
            "tickets:active",
            self._sweep,
            ActiveTickets.derive,
            ttl=settings.ACTIVE_TICKETS_CACHE_SECONDS,
            patch=ActiveTickets.patch,
        )
        self.catalogue = SubjectCatalogue.load(settings.TICKET_SUBJECTS_FILE)
        self.calendar = BusinessCalendar(settings.HOLIDAYS_COUNTRY, settings.EXTRA_HOLIDAYS)
        self.states = list(settings.ACTIVE_TICKET_STATES)
        timeout = settings.UPSTREAM_TIMEOUT_SECONDS
        # A holder reads a few pages and posts once; the lock outlives that comfortably so
        # that it never expires under a live holder, yet frees a zone if a worker dies.
        self.zone_lock_seconds = 6 * timeout + 5
        # Waits stay short so that a request answers within about the upstream timeout
        # (a bot has ~15 s): a busy zone answers 503 `zone_busy` + Retry-After, a key still
        # in flight 409 `idempotency_key_in_progress`; both are safe to repeat.
        self.zone_wait_seconds = max(5.0, timeout / 2)
        self.key_lock_seconds = self.zone_lock_seconds + self.zone_wait_seconds + 5
        self.key_wait_seconds = max(5.0, timeout)
        # A repeat of POST /tickets with its Idempotency-Key (the router runs it).
        self.idempotency = Idempotency(
            self.store,
            "tickets",
            ttl=settings.IDEMPOTENCY_TTL_SECONDS,
            lock_seconds=self.key_lock_seconds,
            wait_seconds=self.key_wait_seconds,
        )

    async def start(self) -> None:
        """Keep the sweep of active tickets warm in the background."""
        self.active.start()

    async def aclose(self) -> None:
        """Stop the sweep's refresh job and loads in flight."""
        await self.active.aclose()

    async def _sweep(self, background: bool) -> list[dict[str, Any]]:
        tickets = await upstream.list_in_states(self.gateway, self.states, background=background)
        return [t.model_dump() for t in tickets]

    # -- subjects ----------------------------------------------------------------------

    def subjects(self) -> dict[str, Any]:
        return self.catalogue.as_data()

    def _subject(self, subject: str) -> tuple[str, int]:
        """The catalogue's spelling of a subject and its priority, or a 400."""
        name = self.catalogue.canonical(subject)
        priority = self.catalogue.priority_of(name) if name is not None else None
        if name is not None and priority is not None:
            return name, priority
        hint = self.catalogue.suggestion(subject)
        message = f"Subject {subject!r} is not in the ticket subject catalogue"
        message += f"; did you mean {hint!r}?" if hint else "; see GET /api/v1/tickets/subjects"
        raise InvalidInput(message, action="ticket_creation_failed")

    # -- zone count --------------------------------------------------------------------

    def _recent_key(self, zone_id: int) -> str:
        return f"tickets:zone:{zone_id}:recent"

    def _posting_key(self, zone_id: int) -> str:
        return f"tickets:zone:{zone_id}:posting"

    async def _count_zone(
        self, zone_id: int, *, fresh: bool = True, read_now: bool = False
    ) -> ZoneCount:
        """The zone's active tickets. `fresh`: from the shared sweep at most
        ZONE_SWEEP_FRESH_SECONDS old (one interactive load across workers when older; the
        zone status and the cap, under the zone lock); `read_now`: from the list read now (never
        a load that began earlier); else from the cached sweep, with no upstream call.
        Tickets created here are in it (patched) or in the zone's recent list."""
        max_age = 0.0 if read_now else self.settings.ZONE_SWEEP_FRESH_SECONDS
        if read_now:
            snapshot = await self.active.load_now()
        else:
            snapshot = await (self.active.recent(max_age) if fresh else self.active.get())
        index = snapshot.value
        tickets = list(index.by_id.values())
        active = index.per_zone.get(zone_id, 0)
        now = time.time()
        for entry in await self.store.get(self._recent_key(zone_id)) or []:
            if entry["id"] in index.by_id or now - entry["at"] > RECENT_SECONDS:
                continue
            # Created here moments ago but absent from the list: not visible yet, or already
            # closed. Only the ticket itself can tell; when it cannot, count it (safe side).
            # A cached read never asks (no upstream call on reads): it counts it.
            ticket: Ticket | None = None
            if fresh:
                ticket = await self._confirmed(entry["id"], max_age)
            if ticket is None or ticket.state is None or ticket.state in self.states:
                active += 1
                known = entry.get("ticket")
                if ticket is None and isinstance(known, dict):
                    ticket = Ticket.model_validate(known)
                if ticket is not None:
                    tickets.append(ticket)
        return ZoneCount(active=active, tickets=tickets)

    async def _confirmed(self, ticket_id: int, max_age: float) -> Ticket | None:
        """The ticket as the upstream shows it, asked at most once per `max_age` across
        workers (a loop of zone checks must not ask each time); None when it cannot tell."""
        key = f"tickets:confirmed:{ticket_id}"
        known = await self.store.get(key) if max_age > 0 else None
        if isinstance(known, dict):
            return Ticket.model_validate(known["ticket"]) if known.get("ticket") else None
        try:
            ticket = await upstream.fetch(self.gateway, ticket_id)
        except UpstreamError:
            return None
        if max_age > 0:
            await self.store.set(
                key, {"ticket": ticket.model_dump() if ticket else None}, ttl=max_age
            )
        return ticket

    async def _remember_created(self, zone_id: int, ticket: Ticket, technician_id: int) -> None:
        now = time.time()
        key = self._recent_key(zone_id)
        entries = [e for e in await self.store.get(key) or [] if now - e["at"] <= RECENT_SECONDS]
        entries.append({"id": ticket.ticket_id, "at": now, "ticket": ticket.model_dump()})
        await self.store.set(key, entries, ttl=RECENT_SECONDS)
        await self.store.set(
            f"tickets:technician:{ticket.ticket_id}", technician_id, ttl=TECHNICIAN_MEMORY_SECONDS
        )
        # Listed at once by every worker (the sweep's shared patch log), before the next load.
        await self.active.update(ticket.model_dump())

    async def zone_status(self, zone_id: int, *, fresh: bool = True) -> dict[str, Any]:
        """The spec's zone-blocked figures. The endpoint counts from the same recent sweep as
        creation (the spec's answer is the cap's own); diagnose reads the cached sweep."""
        count = await self._count_zone(zone_id, fresh=fresh)
        cap = self.settings.MAX_ACTIVE_TICKETS_PER_ZONE
        return {
            "zone_id": zone_id,
            "is_blocked": count.active >= cap,
            "active_tickets": count.active,
            "max_tickets": cap,
        }

    # -- a client's open tickets ---------------------------------------------------------

    async def _require_client(self, service_id: int) -> None:
        """404 for a service the clients source confirms unknown (a miss in the cached list
        asks the upstream for that one service, with the lookups' memory of misses). When
        the clients source cannot answer, it raises: never a guess. (Creation reads the
        record itself for its zone: `_record_zone`.)"""
        client = await self.clients.get_client(service_id) if service_id > 0 else None
        if client is None:
            raise NotFound(f"Client {service_id} not found", action="client_not_found")

    async def open_tickets(self, service_id: int) -> tuple[list[dict[str, Any]], bool]:
        """The service's active tickets from the cached sweep, newest first, and whether the
        sweep is a stale copy. No client check: for callers that made it (diagnose)."""
        snapshot = await self.active.get()
        return [ticket_view(t) for t in snapshot.value.for_service(service_id)], snapshot.stale

    async def client_tickets(self, service_id: int) -> tuple[list[dict[str, Any]], bool]:
        await self._require_client(service_id)
        return await self.open_tickets(service_id)

    # -- get ---------------------------------------------------------------------------

    async def get(self, ticket_id: int) -> dict[str, Any]:
        ticket = await upstream.fetch(self.gateway, ticket_id) if ticket_id > 0 else None
        if ticket is None:
            raise NotFound(f"Ticket {ticket_id} not found", action="ticket_not_found")
        technician_id = ticket.technician_id
        if technician_id is None:
            technician_id = await self.store.get(f"tickets:technician:{ticket_id}")
        return ticket_detail(ticket, technician_id)

    # -- create ------------------------------------------------------------------------

    async def order(self, request: CreateTicketRequest) -> TicketOrder:
        """The request checked against the subject catalogue (a 400 before any upstream
        call, counted and audited as `failed`), with its priority and fingerprint."""
        try:
            subject, priority = self._subject(request.subject)
        except ServiceError:
            # The caller's own words are not audited: not a catalogue subject, they are text.
            details = {"zone_id": request.zone_id, "reason": "unknown_subject"}
            await self._decided("failed", request.service_id, details)
            raise
        if subject != request.subject:
            request = request.model_copy(update={"subject": subject})
        return TicketOrder(request, priority, fingerprint(request.model_dump(mode="json")))

    async def create(self, order: TicketOrder | CreateTicketRequest) -> Ticket:
        """Open the ticket: the created one (or the one an unconfirmed creation of the same
        request did open), or a typed refusal. Each outcome is counted and audited
        (`ticket_create`) here, before the answer is sent; an idempotent replay never
        reaches this (it is no new outcome)."""
        if isinstance(order, CreateTicketRequest):
            order = await self.order(order)
        try:
            ticket = await self._create_in_zone(order)
        except ServiceError as refusal:
            await self._refused(order, refusal)
            raise
        details = {"ticket_id": ticket.ticket_id, "zone_id": order.request.zone_id}
        await self._decided("created", order.request.service_id, self._with_subject(order, details))
        return ticket

    @staticmethod
    def _with_subject(order: TicketOrder, details: dict[str, Any]) -> dict[str, Any]:
        """Audit details with the subject: the catalogue's word (never the description)."""
        return {"subject": order.request.subject, **details}

    async def _refused(self, order: TicketOrder, refusal: ServiceError) -> None:
        outcome = ticket_outcome(refusal)
        if outcome is None:
            return
        details: dict[str, Any] = {"zone_id": order.request.zone_id}
        if isinstance(refusal, ZoneLimitReached):
            details.update(refusal.data or {})
        elif isinstance(refusal, TicketAlreadyOpen):
            details["ticket_id"] = (refusal.data or {}).get("ticket_id")
        elif isinstance(refusal, ZoneMismatch):
            details["record_zone_id"] = (refusal.data or {}).get("zone_id")
        else:
            details["reason"] = (refusal.meta or {}).get("reason", refusal.action)
        await self._decided(outcome, order.request.service_id, self._with_subject(order, details))

    async def _decided(self, outcome: str, service_id: int, details: dict[str, Any]) -> None:
        """One creation outcome: counted, then audited (`ticket_create`, CALLERS.md 4)."""
        if self.metrics is not None:
            self.metrics.ticket(outcome)
        await self.audit.record("ticket_create", outcome, service_id=service_id, details=details)

    async def _record_zone(self, request: CreateTicketRequest) -> CreateTicketRequest:
        """The request with the zone of the service's client record (CALLERS.md 2, "Zone
        cap"): the zone counted, locked and capped is never the caller's word. A body zone
        that differs is a 422 `zone_mismatch` (nothing reaches the upstream); a record with no
        zone keeps the body's. 404 for an unknown service. A clients source that cannot
        answer fails the creation: the zone is never guessed."""
        service_id = request.service_id
        try:
            client = await self.clients.get_client(service_id)
        except StoreUnavailable:
            raise
        except ServiceError as exc:
            log.info("client record for service %d unavailable (%s)", service_id, exc.action)
            if exc.status_code == 503:
                # Busy or rate limited: safe to repeat, with the upstream's Retry-After.
                raise TicketCreationFailed(
                    "The ISP backend is busy (could not read the customer's zone); nothing "
                    "was created, retry shortly",
                    status_code=503,
                    meta={"reason": exc.action},
                    headers=exc.headers,
                ) from None
            raise TicketCreationFailed(
                "The ISP backend is not available (could not read the customer's zone); "
                "nothing was created, retry shortly",
                meta={"reason": "upstream_unavailable"},
            ) from None
        if client is None:
            raise NotFound(f"Client {service_id} not found", action="client_not_found")
        zone_id = client.get("zone_id")
        if zone_id is None or zone_id == request.zone_id:
            return request
        raise ZoneMismatch(
            f"Service {service_id} is in zone {zone_id}, not zone {request.zone_id}",
            data={"zone_id": zone_id},
        )

    async def _create_in_zone(self, order: TicketOrder) -> Ticket:
        # Outside the zone lock: a miss of the cached list may cost an upstream query.
        request = await self._record_zone(order.request)
        zone_id = request.zone_id
        # Every answer within UPSTREAM_TIMEOUT_SECONDS + 2 s (CALLERS.md 2): the locks are
        # waited for only while the request has time left.
        wait = _within_deadline(self.zone_wait_seconds)
        try:
            async with (
                self.store.lock(
                    f"zone:{zone_id}", timeout=self.zone_lock_seconds, blocking_timeout=wait
                ),
                # Always inside a zone's lock (one order, no deadlock): the duplicate guard
                # holds for a service whose record has no zone, whatever zone each call names.
                self.store.lock(
                    f"tickets:service:{request.service_id}",
                    timeout=self.zone_lock_seconds,
                    blocking_timeout=_within_deadline(wait),
                ),
            ):
                return await self._zone_step(request, order.priority, order.fingerprint)
        except LockTimeout:
            raise TicketCreationFailed(
                f"Zone {zone_id} is busy with another ticket creation; retry shortly",
                status_code=503,
                meta={"reason": "zone_busy"},
                headers={"Retry-After": "2"},
            ) from None

    async def _zone_step(self, request: CreateTicketRequest, priority: int, fp: str) -> Ticket:
        zone_id, cap = request.zone_id, self.settings.MAX_ACTIVE_TICKETS_PER_ZONE
        unconfirmed_key = f"tickets:unconfirmed:{fp}"
        posting_key = self._posting_key(zone_id)
        unconfirmed, posting = await self.store.get_many([unconfirmed_key, posting_key])
        try:
            # A creation whose outcome was lost is looked for in a list read now.
            count = await self._count_zone(
                zone_id, read_now=unconfirmed is not None or posting is not None
            )
        except UpstreamError as exc:
            raise self._failure(exc, "could not count the zone's active tickets") from None
        if posting is not None:
            await self._settle_posting(zone_id, posting["after_id"], count.tickets)
        if unconfirmed is not None:
            found = self._find_unconfirmed(request, count.tickets, unconfirmed["after_id"])
            if found is not None:
                log.info("ticket %d: an unconfirmed creation did happen", found.ticket_id)
                await self.store.delete(unconfirmed_key)
                await self._remember_created(
                    zone_id, found.model_copy(update={"zone_id": zone_id}), request.technician_id
                )
                return self._reconciled(found, request, priority)
        if count.active >= cap:
            raise ZoneLimitReached(
                f"Zone {zone_id} already has {count.active} active tickets (limit {cap}); "
                "no new ticket until one is resolved",
                data={"max_tickets": cap, "active_tickets": count.active},
            )
        if self.settings.DUPLICATE_TICKET_GUARD:
            duplicate = self._open_duplicate(request, count.tickets)
            if duplicate is not None:
                raise TicketAlreadyOpen(
                    f"Service {request.service_id} already has an open ticket "
                    f"({duplicate.ticket_id}) for {request.subject!r}",
                    data=ticket_view(duplicate),
                )
        now = datetime.now(self.settings.tz)
        end = self.calendar.add_business_days(now, self.settings.MAX_TICKET_RESOLUTION_DAYS)
        new = NewTicket(
            service_id=request.service_id,
            subject=request.subject,
            description=request.description,
            technician_id=request.technician_id,
            state=self.states[0],
            priority=priority,
            start=now,
            end=end,
            department=DEPARTMENT,
        )
        if self.stopping.is_set():
            # The last moment nothing has reached the upstream (issue 21): a worker asked to
            # stop refuses, and the locks go with the refusal; a POST already sent finishes.
            raise TicketCreationFailed(
                "This server is stopping; nothing was created, retry (another replica answers)",
                status_code=503,
                meta={"reason": "server_stopping"},
                headers={"Retry-After": "1"},
            )
        mark = {"after_id": max((t.ticket_id for t in count.tickets), default=0)}
        # Both marks before the POST; the replicated one last, as its wait covers both (and
        # the zone lock taken before them): a master that dies from here on leaves them on
        # the replica the sentinels promote.
        await self.store.set(unconfirmed_key, mark, ttl=self.settings.IDEMPOTENCY_TTL_SECONDS)
        await self.store.set_replicated(posting_key, mark, ttl=RECENT_SECONDS)
        try:
            # The POST gets what the zone wait and the sweep left of the deadline, and the
            # answer's margin: a reply later than that is lost to the bot anyway, and the
            # repeat of the request finds the ticket if it was made (outcome unknown below).
            left = _within_deadline(self.settings.UPSTREAM_TIMEOUT_SECONDS)
            created = await upstream.create(self.gateway, new, timeout=left + POST_MARGIN_SECONDS)
        except UpstreamUnavailable:
            created = None
        except UpstreamError as exc:
            await self._unmark(unconfirmed_key, posting_key)  # refused: nothing was created
            raise self._failure(exc, "refused the ticket") from None
        if created is None:
            # Timed out, dropped, 5xx or an unreadable 201: the ticket may exist; the marks
            # stay for the next creation in the zone and for a repeat of this request.
            log.warning("ticket creation for service %d: outcome unknown", request.service_id)
            raise TicketCreationFailed(
                "The ISP backend did not confirm the ticket; it may have been created. "
                "Repeating the same request is safe: the service looks for that ticket "
                "before creating another",
                meta={"reason": "outcome_unknown"},
            )
        listed = Ticket(
            ticket_id=created.ticket_id,
            subject=created.subject or request.subject,
            description=request.description,
            state=self.states[0],
            status_label=created.status_label or STATE_LABELS.get(self.states[0], "Nuevo"),
            priority=created.priority or str(priority),
            # The upstream's own times when its answer has them: the ticket then shows the
            # same times here as in every later read of it (both local times in TIMEZONE).
            created_at=created.created_at or now.strftime(OUR_MOMENT),
            end_date=created.end_date or end.strftime(OUR_MOMENT),
            service_id=request.service_id,
            zone_id=zone_id,
            technician_id=request.technician_id,
            technician_name=created.technician_name,
            technician_email=created.technician_email,
        )
        await self._remember_created(zone_id, listed, request.technician_id)
        await self._unmark(unconfirmed_key, posting_key)
        return listed

    async def _unmark(self, *keys: str) -> None:
        """Remove the marks of a POST whose outcome is recorded. A store away now leaves
        them: the next creation in the zone then only reads the list once more."""
        with contextlib.suppress(StoreUnavailable):
            for key in keys:
                await self.store.delete(key)

    async def _settle_posting(self, zone_id: int, after_id: int, tickets: list[Ticket]) -> None:
        """A creation in this zone marked its POST and never recorded the outcome (the store
        or its worker went away after it). The list just read shows what it made: the zone's
        tickets newer than the mark join the shared sweep (the next counts, on any worker,
        see them before its next load), and the mark is done."""
        for ticket in tickets:
            if ticket.zone_id == zone_id and ticket.ticket_id > after_id:
                await self.active.update(ticket.model_dump())
        await self.store.delete(self._posting_key(zone_id))

    def _same_subject(self, stored: str | None, subject: str) -> bool:
        """A ticket's `asunto` is the catalogue subject, as is or stored as
        "<subject> - <client name>" (UPSTREAM.md)."""
        if stored is None:
            return False
        return subject in (
            self.catalogue.canonical(stored),
            self.catalogue.canonical(stored.split(" - ", 1)[0]),
        )

    def _open_duplicate(self, request: CreateTicketRequest, tickets: list[Ticket]) -> Ticket | None:
        """The newest active ticket of the service with the request's subject, if any."""
        same = [
            t
            for t in tickets
            if t.service_id == request.service_id and self._same_subject(t.subject, request.subject)
        ]
        return max(same, key=_newest_first, default=None)

    @staticmethod
    def _find_unconfirmed(
        request: CreateTicketRequest, tickets: list[Ticket], after_id: int
    ) -> Ticket | None:
        for ticket in sorted(tickets, key=lambda t: t.ticket_id):
            if (
                ticket.ticket_id > after_id
                and ticket.service_id == request.service_id
                and ticket.subject == request.subject
                and (ticket.description or "").strip() == request.description.strip()
            ):
                return ticket
        return None

    def _reconciled(self, ticket: Ticket, request: CreateTicketRequest, priority: int) -> Ticket:
        """A ticket an unconfirmed creation did open, with what the request and the
        calendar say where the upstream's list leaves a blank."""
        created_at = ticket.created_at
        end_date = ticket.end_date
        if created_at is None or end_date is None:
            now = datetime.now(self.settings.tz)
            created_at = created_at or now.strftime(OUR_MOMENT)
            end = self.calendar.add_business_days(now, self.settings.MAX_TICKET_RESOLUTION_DAYS)
            end_date = end_date or end.strftime(OUR_MOMENT)
        return ticket.model_copy(
            update={
                "subject": ticket.subject or request.subject,
                "created_at": created_at,
                "end_date": end_date,
                "status_label": ticket.status_label or STATE_LABELS.get(self.states[0], "Nuevo"),
                "priority": ticket.priority or str(priority),
            }
        )

    @staticmethod
    def _failure(exc: UpstreamError, what: str) -> TicketCreationFailed:
        """An upstream error as `ticket_creation_failed`, with a safe reason (never the body)."""
        if isinstance(exc, UpstreamRateLimited):
            return TicketCreationFailed(
                "The ISP backend is rate limiting requests; retry shortly",
                status_code=503,
                meta={"reason": "upstream_rate_limited"},
                headers=exc.headers,
            )
        if isinstance(exc, UpstreamUnauthorized):
            return TicketCreationFailed(
                "The ISP backend refused the service's credentials",
                meta={"reason": "upstream_unauthorized"},
            )
        if isinstance(exc, TicketRejected):
            errors = [{"field": name, "message": message} for name, message in exc.fields]
            message = f"The ISP backend {what} {exc.answer}"
            if errors:
                message += f": {errors[0]['field']}: {errors[0]['message']}"
                if len(errors) > 1:
                    message += f" (and {len(errors) - 1} more)"
            if exc.of_request:
                # The request's own fields (an unknown technician): the caller's to fix, not
                # a backend that failed (CALLERS.md, "Answers a bot can say").
                field_name = errors[0]["field"]
                return TicketCreationFailed(
                    f"The ISP backend refused the ticket's {field_name}: {errors[0]['message']}",
                    status_code=400,
                    data={"field": field_name, "errors": errors},
                    meta={"reason": "upstream_rejected", "errors": errors},
                )
            return TicketCreationFailed(
                message, meta={"reason": "upstream_rejected", "errors": errors}
            )
        return TicketCreationFailed(
            f"The ISP backend is not available ({what}); nothing was created, retry shortly",
            meta={"reason": "upstream_unavailable"},
        )
