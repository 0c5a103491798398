"""The ISP's catalogues, no customer in them: internet plans (with prices and speeds) and
payment methods. No verification needed."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.mcp.tools.base import Args, Call, NoArgs, Outcome, ToolFailure, ToolSpec
from isp_gateway.upstream.plans import PlanDetail


class PlanArgs(Args):
    plan_id: int | None = Field(default=None, ge=1, description="The plan's id")
    name: str | None = Field(
        default=None, min_length=1, max_length=200, description="The plan's name, as written"
    )


def _plan(detail: PlanDetail) -> dict[str, Any]:
    return detail.model_dump()


def _plan_sentence(detail: PlanDetail) -> str:
    if detail.price is None:
        return messages.say(Action.INTERNET_PLAN_FOUND, "no_detail", name=detail.name)
    return messages.say(
        Action.INTERNET_PLAN_FOUND,
        "detail",
        name=detail.name,
        price=messages.amount(detail.price),
        down=_speed(detail.download_speed),
        up=_speed(detail.upload_speed),
    )


def _speed(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:g}"


async def list_internet_plans(call: Call, _: NoArgs) -> Outcome:
    details, _stale = await call.services.plans.details()
    plans = [_plan(detail) for detail in details]
    sentence = messages.say(Action.INTERNET_PLANS_LISTED, "count", count=len(plans))
    return Outcome({"plans": plans}, sentence)


async def internet_plan(call: Call, args: PlanArgs) -> Outcome:
    plans = call.services.plans
    if (args.plan_id is None) == (args.name is None):
        raise ToolFailure(
            "invalid_arguments",
            messages.say(Action.VALIDATION_ERROR, "plan_lookup"),
            "Pass exactly one of plan_id or name.",
        )
    if args.plan_id is not None:
        info = await plans.detail(args.plan_id)
        return Outcome({"plan": _plan(info.detail)}, _plan_sentence(info.detail))
    assert args.name is not None
    detail, closest = await plans.named(args.name)
    if detail is None:
        hint = "list_internet_plans lists every plan."
        if closest:
            hint = f"The closest names: {', '.join(closest)}. " + hint
        raise ToolFailure(
            Action.INTERNET_PLAN_NOT_FOUND,
            messages.say(Action.INTERNET_PLAN_NOT_FOUND, "named", name=args.name),
            hint,
            closest=closest,
        )
    return Outcome({"plan": _plan(detail)}, _plan_sentence(detail))


async def list_payment_methods(call: Call, _: NoArgs) -> Outcome:
    listing = await call.services.accounts.payment_methods()
    methods = [dict(method) for method in listing.methods]
    sentence = messages.say(Action.PAYMENT_METHODS_LISTED, "count", count=len(methods))
    return Outcome({"methods": methods}, sentence)


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "list_internet_plans",
        "plans:read",
        "The ISP's internet plans with their monthly price and download/upload speeds in "
        "Mbps (null when the backend has none, as for PCQ plans); no customer data, no "
        "verification needed.",
        NoArgs,
        read_only=True,
        plain=list_internet_plans,
    ),
    ToolSpec(
        "internet_plan",
        "plans:read",
        "One internet plan by plan_id or by name (case and accents aside): its price and "
        "speeds; an unknown name answers the closest ones. No verification needed.",
        PlanArgs,
        read_only=True,
        plain=internet_plan,
    ),
    ToolSpec(
        "list_payment_methods",
        "accounts:read",
        "How customers can pay (no customer data; no verification needed).",
        NoArgs,
        read_only=True,
        plain=list_payment_methods,
    ),
)
