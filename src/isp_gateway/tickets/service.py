"""Tickets (spec 4.7-4.11, DECISIONS.md "Tickets", BEYOND.md): subjects, the zone cap,
creation, lookup, a client's open tickets and the duplicate guard.

The active tickets of every zone are one cached sweep (`CachedResource` "tickets:active":
every page of the active states, refresh ahead, single flight, stale-if-error, shared through
the store). Reads (a client's tickets, diagnose's zone figures) come from it with no upstream
call. Creation is one atomic step per zone under the store's lock (so the Redis store makes it
hold across workers): the unknown-service check first (outside the lock), then under the lock
a fresh foreground load of the sweep (which also refreshes the shared copy), the cap, the
duplicate guard, create. A fresh read per creation is the price of a cap that holds while
other systems open tickets too. A created ticket is patched into the sweep at once (the
cache's patch log, shared through the store), so every worker lists it immediately.

A POST that times out may or may not have created the ticket, and is never repeated blindly.
Its request fingerprint is remembered as "unconfirmed" together with the highest ticket id
seen before it; the next identical request (same Idempotency-Key or not) looks for that
ticket in the zone count it reads anyway, and answers with it instead of creating a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from isp_gateway.cache import CachedResource
from isp_gateway.envelope import envelope, success
from isp_gateway.errors import (
    InvalidInput,
    NotFound,
    ServiceError,
    UpstreamError,
    UpstreamRateLimited,
    UpstreamRejected,
    UpstreamUnauthorized,
    UpstreamUnavailable,
)
from isp_gateway.store import LockTimeout
from isp_gateway.tickets.calendar import BusinessCalendar
from isp_gateway.tickets.schemas import CreateTicketRequest
from isp_gateway.tickets.subjects import SubjectCatalogue
from isp_gateway.upstream import tickets as upstream
from isp_gateway.upstream.tickets import OUR_MOMENT, STATE_LABELS, NewTicket, Ticket

if TYPE_CHECKING:
    from isp_gateway.clients.service import ClientService
    from isp_gateway.runtime import Runtime

log = logging.getLogger("isp_gateway.tickets")

# The upstream's support department (`departamento` / `departamentos_default`).
DEPARTMENT = "Soporte Técnico"
# Tickets this service created are counted for this long even when the upstream's list does
# not show them yet (an eventually consistent list must not let the cap be overrun).
RECENT_SECONDS = 300.0
# The upstream names a ticket's technician; the id we sent is remembered for lookups.
TECHNICIAN_MEMORY_SECONDS = 30 * 86400.0


class ZoneLimitReached(ServiceError):
    status_code = 409
    type = "info"
    action = "zone_ticket_limit_reached"


class TicketCreationFailed(ServiceError):
    status_code = 502
    action = "ticket_creation_failed"
    default_message = "The ticket could not be created"


class TicketAlreadyOpen(ServiceError):
    status_code = 409
    type = "info"
    action = "ticket_already_open"


@dataclass
class CreateOutcome:
    status_code: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


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


def ticket_view(ticket: Ticket) -> dict[str, Any]:
    """A ticket as `/clients/{id}/tickets` lists it (BEYOND.md)."""
    return {
        "ticket_id": ticket.ticket_id,
        "subject": ticket.subject,
        "status_ticket": ticket.status_label,
        "priority": ticket.priority,
        "created_at": ticket.created_at,
        "end_date": ticket.end_date,
        "technician": ticket.technician_name or ticket.technician_email,
    }


def fingerprint(request: CreateTicketRequest) -> str:
    canonical = json.dumps(
        request.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


class TicketService:
    def __init__(self, runtime: Runtime, clients: ClientService) -> None:
        self.runtime = runtime
        settings = runtime.settings
        self.settings = settings
        self.store = runtime.store
        self.gateway = runtime.gateway
        self.clients = clients
        self.active: CachedResource[ActiveTickets] = CachedResource(
            runtime.store,
            "tickets:active",
            self._sweep,
            ActiveTickets.derive,
            ttl=settings.ACTIVE_TICKETS_CACHE_SECONDS,
            stale_ttl=settings.STALE_IF_ERROR_SECONDS,
            patch=ActiveTickets.patch,
            metrics=runtime.metrics,
            planner=runtime.planner,
        )
        self._job: asyncio.Task[None] | None = None
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

    async def start(self) -> None:
        """Keep the sweep of active tickets warm in the background."""
        self._job = asyncio.create_task(self.active.run_periodic())

    async def aclose(self) -> None:
        """Stop the sweep's refresh job and loads in flight."""
        if self._job is not None:
            self._job.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._job
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

    async def _count_zone(self, zone_id: int, *, fresh: bool = True) -> ZoneCount:
        """The zone's active tickets. `fresh`: from a foreground load of the sweep (the cap,
        under the zone lock); else from the cached sweep, with no upstream call."""
        snapshot = await (self.active.load_now() if fresh else self.active.get())
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
                try:
                    ticket = await upstream.fetch(self.gateway, entry["id"])
                except UpstreamError:
                    ticket = None
            if ticket is None or ticket.state is None or ticket.state in self.states:
                active += 1
                known = entry.get("ticket")
                if ticket is None and isinstance(known, dict):
                    ticket = Ticket.model_validate(known)
                if ticket is not None:
                    tickets.append(ticket)
        return ZoneCount(active=active, tickets=tickets)

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
        """The spec's zone-blocked figures. The endpoint counts fresh, exactly as creation
        does (the spec's answer is the cap's own); diagnose reads the cached sweep."""
        count = await self._count_zone(zone_id, fresh=fresh)
        cap = self.settings.MAX_ACTIVE_TICKETS_PER_ZONE
        return {
            "zone_id": zone_id,
            "is_blocked": count.active >= cap,
            "active_tickets": count.active,
            "max_tickets": cap,
        }

    # -- a client's open tickets ---------------------------------------------------------

    async def _require_client(self, service_id: int, *, lenient: bool = False) -> None:
        """404 for a service the clients source confirms unknown (a miss in the cached list
        asks the upstream for that one service, with the lookups' memory of misses).

        `lenient` (creation): when the clients source cannot answer, go on; the zone count
        that follows needs the upstream too and answers for it, and the upstream refuses an
        unknown service itself. Reads raise: never a guess."""
        try:
            client = await self.clients.get_client(service_id) if service_id > 0 else None
        except ServiceError as exc:
            if not lenient:
                raise
            log.info("client check for service %d unavailable (%s)", service_id, exc.action)
            return
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
        return {
            "ticket_id": ticket.ticket_id,
            "subject": ticket.subject,
            "created_at": ticket.created_at,
            "end_date": ticket.end_date,
            "status_ticket": ticket.status_label,
            "priority": ticket.priority,
            "answer_text": ticket.answer_text,
            "service_id": ticket.service_id,
            "description": ticket.description,
            "technician_id": technician_id,
            "technician_name": ticket.technician_name,
        }

    # -- create ------------------------------------------------------------------------

    async def create(
        self, request: CreateTicketRequest, idempotency_key: str | None
    ) -> CreateOutcome:
        subject, priority = self._subject(request.subject)  # refused before any upstream call
        if subject != request.subject:
            request = request.model_copy(update={"subject": subject})
        fp = fingerprint(request)
        if not idempotency_key:
            return await self._create_in_zone(request, priority, fp)
        digest = hashlib.sha256(idempotency_key.encode()).hexdigest()
        record_key = f"idempotency:tickets:{digest}"
        ttl = self.settings.IDEMPOTENCY_TTL_SECONDS
        try:
            async with self.store.lock(
                record_key, timeout=self.key_lock_seconds, blocking_timeout=self.key_wait_seconds
            ):
                record = await self.store.get(record_key)
                if record is not None and record["fingerprint"] != fp:
                    raise ServiceError(
                        "This Idempotency-Key was already used with a different request body",
                        action="idempotency_key_reused",
                        status_code=422,
                    )
                if record is not None and record.get("status") is not None:
                    return CreateOutcome(
                        record["status"], record["body"], {"Idempotent-Replayed": "true"}
                    )
                if record is None:
                    # The key is bound to this body from its first use, whatever the outcome.
                    await self.store.set(record_key, {"fingerprint": fp}, ttl=ttl)
                # Final answers are replayed for the key's lifetime (DECISIONS.md: "returns
                # the first answer"): a created ticket, and the zone-cap and duplicate
                # refusals. An unknown service (404) is not final either. A failure
                # (upstream down, outcome unknown) is not final: a repeat with this key tries
                # again, and reconciles a POST whose answer was lost.
                try:
                    outcome = await self._create_in_zone(request, priority, fp)
                except (ZoneLimitReached, TicketAlreadyOpen) as refusal:
                    outcome = CreateOutcome(
                        refusal.status_code,
                        envelope(
                            ok=False,
                            type=refusal.type,
                            action=refusal.action,
                            data=refusal.data,
                            message=refusal.message,
                        ),
                    )
                await self.store.set(
                    record_key,
                    {"fingerprint": fp, "status": outcome.status_code, "body": outcome.body},
                    ttl=ttl,
                )
                return outcome
        except LockTimeout:
            raise ServiceError(
                "A request with this Idempotency-Key is still being processed; retry shortly",
                action="idempotency_key_in_progress",
                status_code=409,
                headers={"Retry-After": "2"},
            ) from None

    async def _create_in_zone(
        self, request: CreateTicketRequest, priority: int, fp: str
    ) -> CreateOutcome:
        zone_id = request.zone_id
        # Outside the zone lock: a miss of the cached list may cost an upstream query.
        await self._require_client(request.service_id, lenient=True)
        try:
            async with self.store.lock(
                f"zone:{zone_id}",
                timeout=self.zone_lock_seconds,
                blocking_timeout=self.zone_wait_seconds,
            ):
                return await self._zone_step(request, priority, fp)
        except LockTimeout:
            raise TicketCreationFailed(
                f"Zone {zone_id} is busy with another ticket creation; retry shortly",
                status_code=503,
                meta={"reason": "zone_busy"},
                headers={"Retry-After": "2"},
            ) from None

    async def _zone_step(
        self, request: CreateTicketRequest, priority: int, fp: str
    ) -> CreateOutcome:
        zone_id, cap = request.zone_id, self.settings.MAX_ACTIVE_TICKETS_PER_ZONE
        unconfirmed_key = f"tickets:unconfirmed:{fp}"
        try:
            count = await self._count_zone(zone_id)
        except UpstreamError as exc:
            raise self._failure(exc, "could not count the zone's active tickets") from None
        unconfirmed = await self.store.get(unconfirmed_key)
        if unconfirmed is not None:
            found = self._find_unconfirmed(request, count.tickets, unconfirmed["after_id"])
            if found is not None:
                log.info("ticket %d: an unconfirmed creation did happen", found.ticket_id)
                await self.store.delete(unconfirmed_key)
                await self._remember_created(
                    zone_id, found.model_copy(update={"zone_id": zone_id}), request.technician_id
                )
                return self._created(self._reconciled(found, request, priority))
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
        after_id = max((t.ticket_id for t in count.tickets), default=0)
        try:
            created = await upstream.create(self.gateway, new)
        except UpstreamUnavailable:
            created = None
        except UpstreamError as exc:
            raise self._failure(exc, "refused the ticket") from None
        if created is None:
            # Timed out, dropped, 5xx or an unreadable 201: the ticket may exist.
            await self.store.set(
                unconfirmed_key, {"after_id": after_id}, ttl=self.settings.IDEMPOTENCY_TTL_SECONDS
            )
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
            created_at=now.strftime(OUR_MOMENT),
            end_date=end.strftime(OUR_MOMENT),
            service_id=request.service_id,
            zone_id=zone_id,
            technician_id=request.technician_id,
            technician_name=created.technician_name,
            technician_email=created.technician_email,
        )
        await self._remember_created(zone_id, listed, request.technician_id)
        return self._created(
            {
                "ticket_id": listed.ticket_id,
                "subject": listed.subject,
                "created_at": listed.created_at,
                "end_date": listed.end_date,
                "status_ticket": listed.status_label,
                "priority": listed.priority,
                "answer_text": None,
            }
        )

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
    def _created(ticket: dict[str, Any]) -> CreateOutcome:
        return CreateOutcome(201, success("ticket_created", ticket))

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

    def _reconciled(
        self, ticket: Ticket, request: CreateTicketRequest, priority: int
    ) -> dict[str, Any]:
        created_at = ticket.created_at
        end_date = ticket.end_date
        if created_at is None or end_date is None:
            now = datetime.now(self.settings.tz)
            created_at = created_at or now.strftime(OUR_MOMENT)
            end = self.calendar.add_business_days(now, self.settings.MAX_TICKET_RESOLUTION_DAYS)
            end_date = end_date or end.strftime(OUR_MOMENT)
        return {
            "ticket_id": ticket.ticket_id,
            "subject": ticket.subject or request.subject,
            "created_at": created_at,
            "end_date": end_date,
            "status_ticket": ticket.status_label or STATE_LABELS.get(self.states[0], "Nuevo"),
            "priority": ticket.priority or str(priority),
            "answer_text": ticket.answer_text,
        }

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
        if isinstance(exc, UpstreamRejected):
            errors = [
                {"field": name, "message": message}
                for name, message in upstream.field_errors(exc.body)
            ]
            message = f"The ISP backend {what} ({exc.upstream_status})"
            if errors:
                message += f": {errors[0]['field']}: {errors[0]['message']}"
                if len(errors) > 1:
                    message += f" (and {len(errors) - 1} more)"
            return TicketCreationFailed(
                message, meta={"reason": "upstream_rejected", "errors": errors}
            )
        return TicketCreationFailed(
            f"The ISP backend is not available ({what}); nothing was created, retry shortly",
            meta={"reason": "upstream_unavailable"},
        )
