"""The outage tool (OUTAGES.md 4): `current_outages`, the general outages now active (no
customer data, no verification); and what `open_ticket` answers when OUTAGE_TICKETS=hold
holds a ticket back (tickets.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from isp_gateway.auth.keys import OUTAGES_READ
from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.mcp.tools.base import Call, NoArgs, Outcome, ToolSpec
from isp_gateway.outages.events import view

if TYPE_CHECKING:
    from isp_gateway.tickets.errors import OutageInProgress

HELD_HINT = (
    "A general outage covers this customer's line: no ticket was opened and none is needed "
    "while it lasts (current_outages describes it). If the problem remains once it has "
    "ended, open_ticket again."
)


def outages_sentence(outages: list[dict[str, Any]]) -> str:
    listed = Action.OUTAGES_LISTED
    if not outages:
        return messages.say(listed, "none")
    if len(outages) == 1:
        description = (outages[0].get("description") or "").rstrip(" .")
        if description:
            return messages.say(listed, "one_described", description=description)
        return messages.say(listed, "one")
    return messages.say(listed, "many", count=len(outages))


async def current_outages(call: Call, _: NoArgs) -> Outcome:
    outages = [view(outage) for outage in await call.services.outages.current()]
    return Outcome({"outages": outages}, outages_sentence(outages))


def held_ticket(held: OutageInProgress) -> Outcome:
    """`open_ticket`'s answer for a ticket held back by an outage: not an error, news."""
    data = {"outcome": Action.OUTAGE_IN_PROGRESS, "outage": held.data or {}}
    return Outcome(data, messages.say(Action.OUTAGE_IN_PROGRESS), HELD_HINT)


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "current_outages",
        OUTAGES_READ,
        "The general outages now active (a router's flag in the ISP backend): each with its "
        "description, since when and the zones affected. Before opening a ticket for a "
        "customer without internet (no customer data; no verification needed).",
        NoArgs,
        read_only=True,
        plain=current_outages,
    ),
)
