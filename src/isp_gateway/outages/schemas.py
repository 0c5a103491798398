"""The shape of an outage as the API shows it (OUTAGES.md 4)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Outage(BaseModel):
    """A general outage now active on a router (its `falla_general` flag is up)."""

    outage_id: str = Field(description="Opaque, stable for one outage (the same in its notices)")
    router_id: int
    router_name: str | None
    description: str | None = Field(description="The backend's description of the outage")
    since: str = Field(description="When the gateway first saw the flag (UTC, ISO 8601)")
    zone_ids: list[int] = Field(description="The zones of the affected clients, ascending")
    affected_count: int | None = Field(
        description="Services whose client row names the router; null when the backend's "
        "rows name no router"
    )
