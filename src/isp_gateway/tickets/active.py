"""The active tickets of every zone, as one swept list indexed by id, service and zone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from isp_gateway.upstream.tickets import Ticket


@dataclass
class ZoneCount:
    active: int
    tickets: list[Ticket]  # every active ticket, all zones (for reconciliation and the guard)


def newest_first(ticket: Ticket) -> tuple[str, int]:
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
            listed.sort(key=newest_first, reverse=True)

    def for_service(self, service_id: int) -> list[Ticket]:
        """The service's active tickets, newest first (higher id first on a tie)."""
        return list(self.by_service.get(service_id, ()))
