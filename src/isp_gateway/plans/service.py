"""Plans (spec 4.14-4.15, DECISIONS.md "Plans" and "Caching"): the cached catalogue and details.

The list is a `CachedResource` (PLAN_CACHE_SECONDS, refresh ahead, single flight,
stale-if-error) kept warm by a periodic job. Details are cached the same way, one resource
per plan. This is also the plans source the clients feature asks for a missing plan price
(`price_for`): one implementation.
"""

from __future__ import annotations

import asyncio
import difflib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.kit.cache import CachedResource
from isp_gateway.kit.errors import NotFound, UpstreamError
from isp_gateway.upstream.plans import (
    Plan,
    PlanDetail,
    detail_kind,
    fetch_detail,
    fetch_plans,
    has_detail,
    normalise_name,
)

if TYPE_CHECKING:
    from isp_gateway.parts import Parts


@dataclass
class PlanIndex:
    plans: list[Plan]
    by_id: dict[int, Plan] = field(default_factory=dict)
    # A name shared by two plans maps to None: a price must never come from a guess.
    by_name: dict[str, Plan | None] = field(default_factory=dict)


def _index(value: Any) -> PlanIndex:
    plans = [Plan.model_validate(row) for row in value or []]
    index = PlanIndex(plans)
    for plan in plans:
        index.by_id.setdefault(plan.plan_id, plan)
        key = normalise_name(plan.name)
        if key:
            index.by_name[key] = None if key in index.by_name else plan
    return index


def _basic(plan: Plan) -> PlanDetail:
    """What is known of a plan without its detail: no price, no speeds."""
    return PlanDetail(
        plan_id=plan.plan_id,
        name=plan.name,
        type=plan.type,
        price=None,
        download_speed=None,
        upload_speed=None,
    )


def _detail(value: Any) -> PlanDetail | None:
    return None if value is None else PlanDetail.model_validate(value)


@dataclass(frozen=True)
class PlanList:
    plans: list[Plan]
    stale: bool


@dataclass(frozen=True)
class PlanInfo:
    detail: PlanDetail
    stale: bool
    message: str | None = None


class PlanService:
    def __init__(self, parts: Parts) -> None:
        self.store, self.gateway, self.lists = parts.store, parts.gateway, parts.lists
        self.settings = settings = parts.settings
        self._ttl = float(settings.PLAN_CACHE_SECONDS)
        self.catalogue: CachedResource[PlanIndex] = self.lists.resource(
            "plans:list", self._load_list, _index, ttl=self._ttl
        )
        self._details: dict[tuple[int, str], CachedResource[PlanDetail | None]] = {}

    async def start(self) -> None:
        """Start the periodic refresh of the plan list."""
        self.catalogue.start()

    async def aclose(self) -> None:
        """Stop the refresh job and any in-flight loads."""
        await self.catalogue.aclose()
        for resource in self._details.values():
            await resource.aclose()

    async def _load_list(self, background: bool) -> list[dict[str, Any]]:
        plans = await fetch_plans(self.gateway, background=background)
        return [plan.model_dump() for plan in plans]

    def _detail_resource(self, plan: Plan) -> CachedResource[PlanDetail | None]:
        key = (plan.plan_id, plan.type)
        resource = self._details.get(key)
        if resource is None:

            async def load(background: bool) -> dict[str, Any] | None:
                detail = await fetch_detail(self.gateway, plan, background=background)
                return None if detail is None else detail.model_dump()

            slug = detail_kind(plan)
            resource = self.lists.resource(
                f"plans:detail:{slug}:{plan.plan_id}", load, _detail, ttl=self._ttl, planned=False
            )
            self._details[key] = resource
        return resource

    async def list_plans(self) -> PlanList:
        """Every plan of the catalogue (possibly a stale copy while the upstream fails)."""
        snapshot = await self.catalogue.get()
        return PlanList(list(snapshot.value.plans), snapshot.stale)

    async def _find(self, plan_id: int) -> tuple[Plan | None, bool]:
        snapshot = await self.catalogue.get()
        plan = snapshot.value.by_id.get(plan_id)
        # A plan created since the last load: reload once, at most every NEGATIVE_CACHE_SECONDS.
        negative_ttl = self.settings.NEGATIVE_CACHE_SECONDS
        missed_at = time.time()
        if plan is None and missed_at - snapshot.loaded_at >= negative_ttl:
            await self.catalogue.refresh(started_after=missed_at)
            snapshot = await self.catalogue.get()
            plan = snapshot.value.by_id.get(plan_id)
        return plan, snapshot.stale

    async def detail(self, plan_id: int) -> PlanInfo:
        """One plan with price and speeds (PPPOE, SIMPLE QUEUE); basic fields for PCQ."""
        plan, stale = await self._find(plan_id)
        if plan is None:
            raise NotFound(action=Action.INTERNET_PLAN_NOT_FOUND)
        if not has_detail(plan):
            basic = _basic(plan)
            return PlanInfo(basic, stale, messages.say(Action.INTERNET_PLAN_FOUND, "basic"))
        snapshot = await self._detail_resource(plan).get()
        if snapshot.value is None:
            raise NotFound(action=Action.INTERNET_PLAN_NOT_FOUND)
        return PlanInfo(snapshot.value, stale or snapshot.stale)

    async def details(self) -> tuple[list[PlanDetail], bool]:
        """Every plan with its price and speeds (PCQ plans: none; their backend has no
        detail), and whether a copy was stale. Each detail is its own cached resource: a
        warm catalogue costs no upstream call, a cold one one call per plan, once per
        PLAN_CACHE_SECONDS, fetched together."""
        listing = await self.list_plans()
        infos = await asyncio.gather(*(self._info(plan, tolerant=True) for plan in listing.plans))
        return [info.detail for info in infos], listing.stale or any(i.stale for i in infos)

    async def _info(self, plan: Plan, *, tolerant: bool = False) -> PlanInfo:
        """The plan's detail; `tolerant`: a detail the upstream cannot give now is the
        plan without price and speeds (unknown, never guessed), marked stale."""
        if not has_detail(plan):
            return PlanInfo(_basic(plan), False)
        try:
            snapshot = await self._detail_resource(plan).get()
        except UpstreamError:
            if not tolerant:
                raise
            return PlanInfo(_basic(plan), True)
        detail = snapshot.value if snapshot.value is not None else _basic(plan)
        return PlanInfo(detail, snapshot.stale)

    async def named(self, name: str) -> tuple[PlanDetail | None, list[str]]:
        """The plan called `name` (compared as plan names are: case, accents and punctuation
        aside) with its price and speeds, or None and the closest names of the catalogue."""
        index = (await self.catalogue.get()).value
        wanted = normalise_name(name)
        plan = index.by_name.get(wanted)
        if plan is not None:
            return (await self._info(plan)).detail, []
        names = {normalise_name(p.name): p.name for p in index.plans}
        near = difflib.get_close_matches(wanted, list(names), n=3, cutoff=0.5)
        return None, [names[n] for n in near]

    async def price_for(self, plan_id: int | None, plan_name: str | None) -> float | None:
        """The price of a plan from the plans source (list, then detail by type).

        Found by id, else by normalised name; None when unknown, ambiguous, without a detail
        endpoint (PCQ) or without a positive price. Upstream errors propagate: the caller
        decides what a failed lookup means.
        """
        index = (await self.catalogue.get()).value
        plan = index.by_id.get(plan_id) if plan_id is not None else None
        if plan is None and plan_name:
            plan = index.by_name.get(normalise_name(plan_name))
        if plan is None or not has_detail(plan):
            return None
        detail = (await self._detail_resource(plan).get()).value
        if detail is None or detail.price is None or detail.price <= 0:
            return None
        return detail.price
