"""Tickets (spec 4.7-4.11, DECISIONS.md "Tickets"): subjects, the zone cap, creation, lookup.

Creation is one atomic step per zone under the store's lock (so the Redis store makes it hold
across workers): count the zone's active tickets fresh from the upstream, compare with the
cap, create. That costs one paginated upstream read per creation; it is the price of a cap
that holds while other systems open tickets too.

A POST that times out may or may not have created the ticket, and is never repeated blindly.
Its request fingerprint is remembered as "unconfirmed" together with the highest ticket id
seen before it; the next identical request (same Idempotency-Key or not) looks for that
ticket in the zone count it reads anyway, and answers with it instead of creating a second.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

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


@dataclass
class CreateOutcome:
    status_code: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class ZoneCount:
    active: int
    tickets: list[Ticket]  # every active ticket, all zones (for reconciliation)


def fingerprint(request: CreateTicketRequest) -> str:
    canonical = json.dumps(
        request.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


class TicketService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        settings = runtime.settings
        self.settings = settings
        self.store = runtime.store
        self.gateway = runtime.gateway
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
        """No background jobs: every ticket answer is read fresh from the upstream."""

    async def aclose(self) -> None:
        """Nothing to stop."""

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

    async def _count_zone(self, zone_id: int) -> ZoneCount:
        tickets = await upstream.list_in_states(self.gateway, self.states)
        listed = {t.ticket_id for t in tickets}
        active = sum(1 for t in tickets if t.zone_id == zone_id)
        now = time.time()
        for entry in await self.store.get(self._recent_key(zone_id)) or []:
            if entry["id"] in listed or now - entry["at"] > RECENT_SECONDS:
                continue
            # Created here moments ago but absent from the list: not visible yet, or already
            # closed. Only the ticket itself can tell; when it cannot, count it (safe side).
            try:
                ticket = await upstream.fetch(self.gateway, entry["id"])
            except UpstreamError:
                ticket = None
            if ticket is None or ticket.state is None or ticket.state in self.states:
                active += 1
        return ZoneCount(active=active, tickets=tickets)

    async def _remember_created(self, zone_id: int, ticket_id: int, technician_id: int) -> None:
        now = time.time()
        key = self._recent_key(zone_id)
        entries = [e for e in await self.store.get(key) or [] if now - e["at"] <= RECENT_SECONDS]
        entries.append({"id": ticket_id, "at": now})
        await self.store.set(key, entries, ttl=RECENT_SECONDS)
        await self.store.set(
            f"tickets:technician:{ticket_id}", technician_id, ttl=TECHNICIAN_MEMORY_SECONDS
        )

    async def zone_status(self, zone_id: int) -> dict[str, Any]:
        count = await self._count_zone(zone_id)
        cap = self.settings.MAX_ACTIVE_TICKETS_PER_ZONE
        return {
            "zone_id": zone_id,
            "is_blocked": count.active >= cap,
            "active_tickets": count.active,
            "max_tickets": cap,
        }

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
                # the first answer"): a created ticket, and the zone-cap refusal. A failure
                # (upstream down, outcome unknown) is not final: a repeat with this key tries
                # again, and reconciles a POST whose answer was lost.
                try:
                    outcome = await self._create_in_zone(request, priority, fp)
                except ZoneLimitReached as refusal:
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
                await self._remember_created(zone_id, found.ticket_id, request.technician_id)
                return self._created(self._reconciled(found, request, priority))
        if count.active >= cap:
            raise ZoneLimitReached(
                f"Zone {zone_id} already has {count.active} active tickets (limit {cap}); "
                "no new ticket until one is resolved",
                data={"max_tickets": cap, "active_tickets": count.active},
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
        await self._remember_created(zone_id, created.ticket_id, request.technician_id)
        return self._created(
            {
                "ticket_id": created.ticket_id,
                "subject": created.subject or request.subject,
                "created_at": now.strftime(OUR_MOMENT),
                "end_date": end.strftime(OUR_MOMENT),
                "status_ticket": created.status_label or STATE_LABELS.get(self.states[0], "Nuevo"),
                "priority": created.priority or str(priority),
                "answer_text": None,
            }
        )

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
