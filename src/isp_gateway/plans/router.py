"""HTTP routes for internet plans (spec 4.14-4.15): thin handlers over PlanService."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter

from isp_gateway.auth.dependencies import Scoped
from isp_gateway.auth.keys import PLANS_READ
from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.plans.schemas import InternetPlan, InternetPlanDetail
from isp_gateway.plans.service import PlanService
from isp_gateway.web.deps import ServiceOf
from isp_gateway.web.envelope import BackendResponse, error_responses, success

# Protected like every business endpoint (DECISIONS.md "Auth"), despite the spec's one page.
PlansDep = Annotated[PlanService, ServiceOf(PlanService)]

router = APIRouter(
    prefix="/api/v1/internet-plans", tags=["internet-plans"], dependencies=[Scoped(PLANS_READ)]
)


def _meta(stale: bool) -> dict[str, Any] | None:
    return {"stale": True} if stale else None


# Both spellings answer directly, without a redirect.
@router.get(
    "/", response_model=BackendResponse[list[InternetPlan]], responses=error_responses(502, 503)
)
@router.get("", include_in_schema=False)
async def list_internet_plans(plans: PlansDep) -> dict[str, Any]:
    """The ISP's internet plans (cached; `meta.stale` when served from an old copy)."""
    listing = await plans.list_plans()
    if not listing.plans:
        return success(
            Action.INTERNET_PLAN_NOT_FOUND,
            None,
            message=messages.say(Action.INTERNET_PLAN_NOT_FOUND, "none"),
            meta=_meta(listing.stale),
        )
    data = [plan.model_dump() for plan in listing.plans]
    return success(Action.INTERNET_PLANS_LISTED, data, meta=_meta(listing.stale))


@router.get(
    "/{plan_id}",
    response_model=BackendResponse[InternetPlanDetail],
    responses=error_responses(404, 502, 503, actions={404: Action.INTERNET_PLAN_NOT_FOUND}),
)
@router.get("/{plan_id}/", include_in_schema=False)
async def get_internet_plan(plan_id: int, plans: PlansDep) -> dict[str, Any]:
    """One plan with price and speeds in Mbps (PCQ plans: basic information only)."""
    info = await plans.detail(plan_id)
    return success(
        Action.INTERNET_PLAN_FOUND,
        info.detail.model_dump(),
        message=info.message,
        meta=_meta(info.stale),
    )
