"""Creating a ticket: one atomic step per zone under the store's lock (tickets/service.py
tells the whole story): the client record's zone, the outage hold (OUTAGE_TICKETS=hold), the
cap, the duplicate guard, the marks of a POST whose outcome may be lost, the POST, and what it
made recorded for the next count."""

from __future__ import annotations

import contextlib
import logging
import math
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from isp_gateway.kit import deadline
from isp_gateway.kit.actions import Action
from isp_gateway.kit.errors import (
    NotFound,
    ServiceError,
    StoreUnavailable,
    UpstreamError,
    UpstreamUnavailable,
)
from isp_gateway.outages.events import view
from isp_gateway.store import LockTimeout
from isp_gateway.tickets.active import newest_first
from isp_gateway.tickets.calendar import BusinessCalendar
from isp_gateway.tickets.errors import (
    COUNTING,
    POSTING,
    OutageInProgress,
    TicketAlreadyOpen,
    TicketCreationFailed,
    ZoneLimitReached,
    ZoneMismatch,
    creation_failure,
)
from isp_gateway.tickets.schemas import CreateTicketRequest
from isp_gateway.tickets.subjects import SubjectCatalogue
from isp_gateway.tickets.views import ticket_view
from isp_gateway.tickets.zones import RECENT_SECONDS, ZoneCounter, posting_key
from isp_gateway.upstream import tickets as upstream
from isp_gateway.upstream.gateway import UpstreamNoAnswer
from isp_gateway.upstream.tickets import OUR_MOMENT, STATE_LABELS, NewTicket, Ticket

if TYPE_CHECKING:
    from isp_gateway.clients.service import ClientService
    from isp_gateway.outages.service import OutageService
    from isp_gateway.parts import Parts

log = logging.getLogger("isp_gateway.tickets")

# The upstream's support department (`departamento` / `departamentos_default`).
DEPARTMENT = "Soporte Técnico"
# Of the answer's 2 s margin past the deadline, what a ticket's POST may use.
POST_MARGIN_SECONDS = 1.0
# A POST the gateway gave up on may still be carried out by a slow backend: an identical
# request waits this many upstream timeouts (and the margin) from it for its ticket to show.
SETTLE_TIMEOUTS = 3
# The longest Retry-After of that wait: the repeat finds the ticket soon after it shows.
SETTLE_RETRY_SECONDS = 5.0


def _within_deadline(seconds: float) -> float:
    """`seconds`, or less: what the request's deadline leaves (never below nothing)."""
    current = deadline.current()
    return seconds if current is None else max(0.0, min(seconds, current.left()))


@dataclass(frozen=True)
class TicketOrder:
    """A creation request checked against the subject catalogue: the request with the
    catalogue's spelling of its subject, that subject's priority, and the request's
    fingerprint (its idempotency and the memory of an unconfirmed creation)."""

    request: CreateTicketRequest
    priority: int
    fingerprint: str
    # The zone and technician are the client record's (an agent's order names neither).
    from_record: bool = False


class TicketCreation:
    """The creation step of one ticket, under its zone's lock."""

    def __init__(
        self,
        parts: Parts,
        *,
        clients: ClientService,
        outages: OutageService,
        zones: ZoneCounter,
        catalogue: SubjectCatalogue,
    ) -> None:
        settings = self.settings = parts.settings
        self.store, self.gateway, self.stopping = parts.store, parts.gateway, parts.stopping
        self.clients, self.zones, self.catalogue = clients, zones, catalogue
        self.outages = outages
        self.calendar = BusinessCalendar(settings.HOLIDAYS_COUNTRY, settings.EXTRA_HOLIDAYS)
        self.states = zones.states
        timeout = settings.UPSTREAM_TIMEOUT_SECONDS
        # A holder reads a few pages and posts once; the lock outlives that comfortably so
        # that it never expires under a live holder, yet frees a zone if a worker dies.
        self.zone_lock_seconds = 6 * timeout + 5
        # Waits stay short so that a request answers within about the upstream timeout
        # (a bot has ~15 s): a busy zone answers 503 `zone_busy` + Retry-After, a key still
        # in flight 409 `idempotency_key_in_progress`; both are safe to repeat.
        self.zone_wait_seconds = max(5.0, timeout / 2)
        self.settle_seconds = SETTLE_TIMEOUTS * timeout + POST_MARGIN_SECONDS

    async def _record_zone(
        self, order: TicketOrder
    ) -> tuple[CreateTicketRequest, bool, int | None]:
        """The request with the zone of the service's client record (CALLERS.md 2, "Zone
        cap"): the zone counted, locked and capped is never the caller's word. A body zone
        that differs is a 422 `zone_mismatch` (nothing reaches the upstream); a record with no
        zone keeps the body's. 404 for an unknown service. A clients source that cannot
        answer fails the creation: the zone is never guessed. An order `from_record` takes
        the record's zone and technician (or DEFAULT_TECHNICIAN_ID), and is refused without
        them (400 `ticket_creation_failed`, `meta.reason` `no_zone` or `no_technician`).
        And whether the zone is the body's because the record has none (CALLERS.md 6), and
        the router the record names (the outage hold's question), or None."""
        request = order.request
        service_id = request.service_id
        try:
            try:
                record, _, _ = await self.clients.find_record(service_id)
            except NotFound:
                record = None
        except StoreUnavailable:
            raise
        except ServiceError as exc:
            log.info("client record for service %d unavailable (%s)", service_id, exc.action)
            if exc.status_code == 503:
                # Busy or rate limited: safe to repeat, with the upstream's Retry-After.
                raise TicketCreationFailed(
                    variant="busy_zone_read",
                    status_code=503,
                    meta={"reason": exc.action},
                    headers=exc.headers,
                ) from None
            raise TicketCreationFailed(
                variant="no_zone_read",
                meta={"reason": Action.UPSTREAM_UNAVAILABLE},
            ) from None
        if record is None:
            raise NotFound(
                action=Action.CLIENT_NOT_FOUND, variant="service", params={"service_id": service_id}
            )
        client, router_id = record["client"], record.get("router_id")
        zone_id = client.get("zone_id")
        if order.from_record:
            request = self._from_record(request, zone_id, client.get("technician_id"))
            return request, False, router_id
        if zone_id is None or zone_id == request.zone_id:
            return request, zone_id is None, router_id
        raise ZoneMismatch(
            variant="zones",
            params={"service_id": service_id, "zone_id": zone_id, "given": request.zone_id},
            data={"zone_id": zone_id},
        )

    def _from_record(
        self, request: CreateTicketRequest, zone_id: int | None, technician_id: int | None
    ) -> CreateTicketRequest:
        technician_id = technician_id or self.settings.DEFAULT_TECHNICIAN_ID
        if zone_id is None:
            raise TicketCreationFailed(
                variant="no_zone",
                status_code=400,
                meta={"reason": "no_zone"},
            )
        if technician_id is None:
            raise TicketCreationFailed(
                variant="no_technician",
                status_code=400,
                meta={"reason": "no_technician"},
            )
        return request.model_copy(update={"zone_id": zone_id, "technician_id": technician_id})

    async def _hold(self, service_id: int, router_id: int | None) -> None:
        """OUTAGE_TICKETS=hold (OUTAGES.md 4): a service whose router has an active general
        outage gets 409 `outage_in_progress` with the outage, before anything is counted,
        locked or sent (the bot tells the customer instead of filing the 300th ticket)."""
        if self.settings.OUTAGE_TICKETS != "hold":
            return
        outage = await self.outages.outage_of(service_id, router_id)
        if outage is not None:
            raise OutageInProgress(
                variant="held",
                params={
                    "service_id": service_id,
                    "outage_id": outage["outage_id"],
                    "router_id": outage["router_id"],
                },
                data=view(outage),
            )

    async def create(self, order: TicketOrder) -> Ticket:
        # Outside the zone lock: a miss of the cached list may cost an upstream query.
        request, borrowed, router_id = await self._record_zone(order)
        await self._hold(request.service_id, router_id)
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
                return await self._zone_step(request, order.priority, order.fingerprint, borrowed)
        except LockTimeout:
            raise _zone_busy(zone_id) from None

    async def _zone_step(
        self, request: CreateTicketRequest, priority: int, fp: str, borrowed: bool
    ) -> Ticket:
        zone_id, cap = request.zone_id, self.settings.MAX_ACTIVE_TICKETS_PER_ZONE
        unconfirmed_key = f"tickets:unconfirmed:{fp}"
        posting_at = posting_key(zone_id)
        unconfirmed, posting = await self.store.get_many([unconfirmed_key, posting_at])
        try:
            # A creation whose outcome was lost is looked for in a list read now.
            count = await self.zones.count(
                zone_id, read_now=unconfirmed is not None or posting is not None
            )
        except UpstreamError as exc:
            raise creation_failure(exc, COUNTING) from None
        pending = posting is not None and await self.zones.settle_posting(
            zone_id, posting, count.tickets, self.settle_seconds
        )
        if unconfirmed is not None:
            found = self._find_unconfirmed(request, count.tickets, unconfirmed["after_id"])
            if found is not None:
                log.info("ticket %d: an unconfirmed creation did happen", found.ticket_id)
                await self.store.delete(unconfirmed_key)
                await self.zones.remember_created(
                    zone_id,
                    found.model_copy(update={"zone_id": zone_id}),
                    request.technician_id,
                    borrowed=borrowed,
                    active=count.tickets,
                )
                return self._reconciled(found, request, priority)
            self._not_settled(unconfirmed)
        if count.active >= cap:
            raise ZoneLimitReached(
                variant="counts",
                params={"zone_id": zone_id, "active": count.active, "limit": cap},
                data={"max_tickets": cap, "active_tickets": count.active},
            )
        if pending:
            # A POST in the zone got no answer and its ticket may still be made: it may
            # take the zone's last slot, so nothing is opened until it shows or is past
            # settle_seconds (at most that long; safe to repeat).
            raise _zone_busy(zone_id)
        if self.settings.DUPLICATE_TICKET_GUARD:
            duplicate = self._open_duplicate(request, count.tickets)
            if duplicate is not None:
                raise TicketAlreadyOpen(
                    variant="number",
                    params={"ticket_id": duplicate.ticket_id},
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
                variant="stopping",
                status_code=503,
                meta={"reason": "server_stopping"},
                headers={"Retry-After": "1"},
            )
        mark = {"after_id": max((t.ticket_id for t in count.tickets), default=0), "at": time.time()}
        # Both marks before the POST; the replicated one last, as its wait covers both (and
        # the zone lock taken before them): a master that dies from here on leaves them on
        # the replica the sentinels promote.
        await self.store.set(unconfirmed_key, mark, ttl=self.settings.IDEMPOTENCY_TTL_SECONDS)
        await self.store.set_replicated(posting_at, mark, ttl=RECENT_SECONDS)
        try:
            # The POST gets what the zone wait and the sweep left of the deadline, and the
            # answer's margin: a reply later than that is lost to the bot anyway, and the
            # repeat of the request finds the ticket if it was made (outcome unknown below).
            left = _within_deadline(self.settings.UPSTREAM_TIMEOUT_SECONDS)
            created = await upstream.create(self.gateway, new, timeout=left + POST_MARGIN_SECONDS)
            answered = True
        except UpstreamNoAnswer:
            # Sent and never answered: a slow backend may still make it (_not_settled).
            created, answered = None, False
        except UpstreamUnavailable:
            created, answered = None, True
        except UpstreamError as exc:
            await self.zones.unmark(unconfirmed_key, posting_at)  # refused: nothing was created
            raise creation_failure(exc, POSTING) from None
        if created is None:
            # Timed out, dropped, 5xx or an unreadable 201: the ticket may exist; the marks
            # stay for the next creation in the zone and for a repeat of this request.
            log.warning("ticket creation for service %d: outcome unknown", request.service_id)
            if answered:
                # The backend answered: whatever it made is in its list from now on, and
                # a repeat need not wait for it. (A store away now leaves the wait.)
                answered_mark = {"after_id": mark["after_id"]}
                with contextlib.suppress(StoreUnavailable):
                    await self.store.set(
                        unconfirmed_key, answered_mark, ttl=self.settings.IDEMPOTENCY_TTL_SECONDS
                    )
                    await self.store.set_replicated(posting_at, answered_mark, ttl=RECENT_SECONDS)
            raise TicketCreationFailed(
                variant="outcome_unknown",
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
        await self.zones.remember_created(
            zone_id, listed, request.technician_id, borrowed=borrowed, active=count.tickets
        )
        await self.zones.unmark(unconfirmed_key, posting_at)
        return listed

    def _not_settled(self, unconfirmed: dict[str, Any]) -> None:
        """An identical request's POST whose outcome was lost, not in the list read now:
        while a slow backend may still carry it out (settle_seconds from it), posting again
        could open a second ticket, so this request is refused (503 `outcome_pending`,
        nothing sent; the repeat looks again). Past it, the POST was dropped: this one goes
        ahead. A mark from before marks had a time is past it."""
        left = float(unconfirmed.get("at", 0.0)) + self.settle_seconds - time.time()
        if left > 0:
            raise TicketCreationFailed(
                variant="outcome_pending",
                status_code=503,
                meta={"reason": "outcome_pending"},
                headers={"Retry-After": str(math.ceil(min(left, SETTLE_RETRY_SECONDS)))},
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
        return max(same, key=newest_first, default=None)

    def _find_unconfirmed(
        self, request: CreateTicketRequest, tickets: list[Ticket], after_id: int
    ) -> Ticket | None:
        for ticket in sorted(tickets, key=lambda t: t.ticket_id):
            if (
                ticket.ticket_id > after_id
                and ticket.service_id == request.service_id
                # In any form the account stores it (with the guard off, a miss here is a
                # second ticket for one request).
                and self._same_subject(ticket.subject, request.subject)
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


def _zone_busy(zone_id: int) -> TicketCreationFailed:
    """503 zone_busy: the zone is another creation's for now (its lock, or its POST that got
    no answer); nothing was sent, and the same request may be repeated after Retry-After."""
    return TicketCreationFailed(
        variant="zone_busy",
        params={"zone_id": zone_id},
        status_code=503,
        meta={"reason": "zone_busy"},
        headers={"Retry-After": "2"},
    )
