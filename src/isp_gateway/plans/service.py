"""Plans: the cached catalogue and plan details (spec 4.14-4.15). STUB, to be built."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from isp_gateway.runtime import Runtime


class PlanService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def start(self) -> None:
        """Start background jobs (cache refresh)."""

    async def aclose(self) -> None:
        """Stop background jobs."""

    async def price_for(self, plan_id: int | None, plan_name: str | None) -> float | None:
        """The price of a plan from the plans source (list, then detail by type)."""
        return None
