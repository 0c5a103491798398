"""An outage as it is kept, shown and announced (OUTAGES.md 2, 4, 5).

Kept (the detector's state in the store): `outage_id`, `router_id`, `router_name`,
`description`, `since` (epoch seconds: the load time of the first catalogue copy that showed
the flag), `zone_ids`, `service_ids`, `affected_count` (None when the account's client rows
name no router). Shown by `GET /api/v1/outages` and the MCP tool without `service_ids` (a
large outage has thousands); announced with them.
"""

from __future__ import annotations

import re
from typing import Any

from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.notices.signing import body_text, iso

STARTED = "outage.started"
ENDED = "outage.ended"
# Upstream text said to customers: one line, bounded.
MAX_DESCRIPTION = 300
_SPACES = re.compile(r"\s+")

Outage = dict[str, Any]


def outage_id(router_id: int, since: float, previous: str | None) -> str:
    """Opaque and stable for one outage: the router and the second it was first seen (a
    second outage of a router seen within the same second gets a suffix)."""
    found = f"r{router_id}-{int(since)}"
    return f"{found}-2" if found == previous else found


def clean(description: str | None) -> str | None:
    if not description:
        return None
    text = _SPACES.sub(" ", description).strip()
    return text[:MAX_DESCRIPTION] or None


def started_sentence(outage: Outage) -> str:
    description = (outage.get("description") or "").rstrip(" .")
    if description:
        return messages.say(Action.OUTAGE_IN_PROGRESS, "started_described", description=description)
    return messages.say(Action.OUTAGE_IN_PROGRESS, "started")


def ended_sentence() -> str:
    return messages.say(Action.OUTAGE_IN_PROGRESS, "ended")


def view(outage: Outage, *, notice: bool = False) -> dict[str, Any]:
    """As `GET /api/v1/outages`, the MCP tool and a held ticket's 409 show it; `notice`: as
    a webhook's data does (`started_at` for `since`, and the affected services)."""
    shown = {
        "outage_id": outage["outage_id"],
        "router_id": outage["router_id"],
        "router_name": outage.get("router_name"),
        "description": outage.get("description"),
        "started_at" if notice else "since": iso(float(outage["since"])),
        "zone_ids": list(outage.get("zone_ids") or []),
    }
    if notice:
        shown["service_ids"] = list(outage.get("service_ids") or [])
    shown["affected_count"] = outage.get("affected_count")
    return shown


def started_event(outage: Outage, moment: float) -> tuple[str, str, str]:
    """(type, webhook id, body) of the notice that the outage started."""
    data = {**view(outage, notice=True), "message": started_sentence(outage)}
    return STARTED, f"msg_{outage['outage_id']}_started", body_text(STARTED, moment, data)


def ended_event(outage: Outage, moment: float) -> tuple[str, str, str]:
    """(type, webhook id, body) of the notice that the outage ended, with the same id."""
    data = {
        **view(outage, notice=True),
        "ended_at": iso(moment),
        "duration_seconds": max(0, round(moment - float(outage["since"]))),
        "message": ended_sentence(),
    }
    return ENDED, f"msg_{outage['outage_id']}_ended", body_text(ENDED, moment, data)
