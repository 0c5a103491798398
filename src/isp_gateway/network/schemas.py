"""Request and response models of the ping endpoints (spec 4.12-4.13, DECISIONS.md "Network")."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from isp_gateway.kit.models import RequestModel

MAX_PINGS = 20


class PingRequest(RequestModel):
    pings: int = Field(ge=1, le=MAX_PINGS, description="Number of ICMP packets to send (1-20).")


class PingCreated(BaseModel):
    task_id: str


class PingPending(BaseModel):
    task_id: str
    status: Literal["pending"]


class PingFigures(BaseModel):
    """A finished task: counts made from the per-ping entries; null where unknown."""

    task_id: str
    sent: int | None
    received: int | None
    loss_percent: float | None
