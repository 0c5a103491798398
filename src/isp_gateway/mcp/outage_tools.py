"""The MCP side of general outages (OUTAGES.md 4): the tool `current_outages`, and what
`open_ticket` says when OUTAGE_TICKETS=hold holds a ticket back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.outages.events import view

if TYPE_CHECKING:
    from isp_gateway.outages.service import OutageService
    from isp_gateway.tickets.errors import OutageInProgress


def outages_sentence(outages: list[dict[str, Any]]) -> str:
    if not outages:
        return "No hay fallas generales en este momento."
    if len(outages) == 1:
        description = (outages[0].get("description") or "").rstrip(" .")
        known = f": {description}" if description else ""
        return f"Hay una falla general en curso{known}. Estamos trabajando en ello."
    return f"Hay {len(outages)} fallas generales en curso; estamos trabajando en ellas."


async def current_outages(service: OutageService) -> tuple[dict[str, Any], str]:
    outages = [view(outage) for outage in await service.current()]
    return {"outages": outages}, outages_sentence(outages)


def held_ticket(held: OutageInProgress) -> tuple[dict[str, Any], str]:
    """`open_ticket`'s answer for a ticket held back by an outage: not an error, news."""
    outage = held.data or {}
    return (
        {"outcome": Action.OUTAGE_IN_PROGRESS, "outage": outage},
        messages.SENTENCES[Action.OUTAGE_IN_PROGRESS],
    )
