"""Counting a zone's active tickets (the cap's figure, spec 4.8): the shared sweep, the
tickets created here that the upstream's list does not show yet, and the marks a POST whose
outcome was lost leaves behind (tickets/service.py says why)."""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

from isp_gateway.kit.errors import StoreUnavailable, UpstreamError
from isp_gateway.tickets.active import ActiveTickets, ZoneCount
from isp_gateway.upstream import tickets as upstream
from isp_gateway.upstream.tickets import Ticket

if TYPE_CHECKING:
    from isp_gateway.kit.cache import CachedResource
    from isp_gateway.parts import Parts

# Tickets this service created are counted for this long even when the upstream's list does
# not show them yet (an eventually consistent list must not let the cap be overrun).
RECENT_SECONDS = 300.0
# The upstream names a ticket's technician; the id we sent is remembered for lookups.
TECHNICIAN_MEMORY_SECONDS = 30 * 86400.0
# A ticket of a service with no zone, counted in the zone its request named, is remembered
# there this long after the zone's last such creation (CALLERS.md 6 "Zones for records
# without one"): far longer than a ticket stays open.
BORROWED_SECONDS = 180 * 86400.0


def recent_key(zone_id: int) -> str:
    return f"tickets:zone:{zone_id}:recent"


def borrowed_key(zone_id: int) -> str:
    """The tickets of services with no zone counted in this zone: [{"id", "at"}]."""
    return f"tickets:zone:{zone_id}:borrowed"


def posting_key(zone_id: int) -> str:
    return f"tickets:zone:{zone_id}:posting"


class ZoneCounter:
    """The zone figures of the cap and of `/tickets/zone-blocked/{id}`, and what a creation
    records so that the next count sees it."""

    def __init__(
        self,
        parts: Parts,
        *,
        active: CachedResource[ActiveTickets],
        states: list[int],
    ) -> None:
        self.settings, self.store, self.gateway = parts.settings, parts.store, parts.gateway
        self.active = active
        self.states = states

    async def count(self, zone_id: int, *, fresh: bool = True, read_now: bool = False) -> ZoneCount:
        """The zone's active tickets. `fresh`: from the shared sweep at most
        ZONE_SWEEP_FRESH_SECONDS old (one interactive load across workers when older; the
        zone status and the cap, under the zone lock); `read_now`: from the list read now (never
        a load that began earlier); else from the cached sweep, with no upstream call.
        Tickets created here are in it (patched) or in the zone's recent list; a ticket of a
        service with no zone that a request placed in this zone counts here for as long as
        the sweep lists it active (its own zone there is none), however many sweeps run."""
        max_age = 0.0 if read_now else self.settings.ZONE_SWEEP_FRESH_SECONDS
        if read_now:
            snapshot = await self.active.load_now()
        else:
            snapshot = await (self.active.recent(max_age) if fresh else self.active.get())
        index = snapshot.value
        tickets = list(index.by_id.values())
        active = index.per_zone.get(zone_id, 0)
        now = time.time()
        recent, borrowed = await self.store.get_many([recent_key(zone_id), borrowed_key(zone_id)])
        for entry in borrowed or []:
            listed = index.by_id.get(entry["id"])
            if listed is not None and listed.zone_id is None:
                active += 1
        for entry in recent or []:
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

    async def remember_created(
        self,
        zone_id: int,
        ticket: Ticket,
        technician_id: int,
        *,
        borrowed: bool = False,
        active: list[Ticket] | None = None,
    ) -> None:
        """Record a ticket created in the zone (under its lock). `borrowed`: its service has
        no zone, so the sweep will list it without one; it is kept in the zone's borrowed
        list, from which the entries the sweep no longer lists (`active`, closed) are
        dropped once past RECENT_SECONDS."""
        now = time.time()
        if borrowed:
            listed = {t.ticket_id for t in active or []}
            kept = [
                e
                for e in await self.store.get(borrowed_key(zone_id)) or []
                if e["id"] in listed or now - e["at"] <= RECENT_SECONDS
            ]
            kept.append({"id": ticket.ticket_id, "at": now})
            await self.store.set(borrowed_key(zone_id), kept, ttl=BORROWED_SECONDS)
        key = recent_key(zone_id)
        entries = [e for e in await self.store.get(key) or [] if now - e["at"] <= RECENT_SECONDS]
        entries.append({"id": ticket.ticket_id, "at": now, "ticket": ticket.model_dump()})
        await self.store.set(key, entries, ttl=RECENT_SECONDS)
        await self.store.set(
            f"tickets:technician:{ticket.ticket_id}", technician_id, ttl=TECHNICIAN_MEMORY_SECONDS
        )
        # Listed at once by every worker (the sweep's shared patch log), before the next load.
        await self.active.update(ticket.model_dump())

    async def status(self, zone_id: int, *, fresh: bool = True) -> dict[str, Any]:
        """The spec's zone-blocked figures. The endpoint counts from the same recent sweep as
        creation (the spec's answer is the cap's own); diagnose reads the cached sweep."""
        count = await self.count(zone_id, fresh=fresh)
        cap = self.settings.MAX_ACTIVE_TICKETS_PER_ZONE
        return {
            "zone_id": zone_id,
            "is_blocked": count.active >= cap,
            "active_tickets": count.active,
            "max_tickets": cap,
        }

    async def unmark(self, *keys: str) -> None:
        """Remove the marks of a POST whose outcome is recorded. A store away now leaves
        them: the next creation in the zone then only reads the list once more."""
        with contextlib.suppress(StoreUnavailable):
            for key in keys:
                await self.store.delete(key)

    async def settle_posting(
        self, zone_id: int, mark: dict[str, Any], tickets: list[Ticket], settle_seconds: float
    ) -> bool:
        """A creation in this zone marked its POST and never recorded the outcome (its answer
        never came, or the store or its worker went away after it). The list just read shows
        what it made: the zone's tickets newer than the mark join the shared sweep (the next
        counts, on any worker, see them before its next load), and the mark is done. When
        none shows yet and the POST got no answer less than `settle_seconds` ago, a slow
        backend may still make its ticket: the mark stays, and True says it is pending."""
        shown = False
        for ticket in tickets:
            if ticket.zone_id == zone_id and ticket.ticket_id > mark["after_id"]:
                await self.active.update(ticket.model_dump())
                shown = True
        # A mark without a time (its POST was answered, or it predates the times) is done.
        if not shown and time.time() - float(mark.get("at", 0.0)) < settle_seconds:
            return True
        await self.store.delete(posting_key(zone_id))
        return False
