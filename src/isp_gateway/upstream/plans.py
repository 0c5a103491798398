"""WispHub plans: the catalogue and the per-type detail, mapped to `Plan` / `PlanDetail`.

`GET api/plan-internet/` pages `{"id", "nombre", "tipo"}`; PPPOE details live at
`api/plan-internet/pppoe/{id}/`, SIMPLE QUEUE at `api/plan-internet/queue/{id}/` (the wrong
type's path answers 404) with `precio` (decimal string) and `bajada`/`subida` (`"20"`, `"10M"`).
PCQ plans have no detail endpoint.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from isp_gateway.kit.errors import UpstreamRejected, UpstreamUnavailable
from isp_gateway.kit.prices import read_price
from isp_gateway.kit.text import strip_accents
from isp_gateway.upstream.gateway import UpstreamGateway
from isp_gateway.upstream.records import as_int

PPPOE = "PPPOE"
SIMPLE_QUEUE = "SIMPLE QUEUE"
PCQ = "PCQ"
DETAIL_PATHS = {PPPOE: "pppoe", SIMPLE_QUEUE: "queue"}

# "20", "10M", "512k", "1.5 Mbps", "100MB": a number and an optional unit prefix.
_SPEED = re.compile(r"(\d+(?:[.,]\d+)?)\s*([kmg])?(?:b|bps|bit|bits|b/s|/s)?", re.IGNORECASE)
# k as 1/1024 M, the way plan sheets write it: "512k" is half a mega.
_UNIT_TO_MBPS = {None: 1.0, "k": 1 / 1024, "m": 1.0, "g": 1000.0}


class Plan(BaseModel):
    plan_id: int
    name: str
    type: str


class PlanDetail(BaseModel):
    plan_id: int
    name: str
    type: str
    price: float | None
    download_speed: float | None
    upload_speed: float | None


def detail_kind(plan: Plan) -> str | None:
    """Which detail endpoint a plan has (`"pppoe"`, `"queue"`), None when it has none (PCQ):
    a name for the plan's cached detail, never a path to build."""
    return DETAIL_PATHS.get(plan.type)


def has_detail(plan: Plan) -> bool:
    """Whether the upstream has a detail (price, speeds) for this plan's type."""
    return plan.type in DETAIL_PATHS


def normalise_name(value: str) -> str:
    """Lowercase, no accents or punctuation, single spaces: how plan names are compared."""
    text = strip_accents(value).lower()
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text).split())


def _plan_type(value: Any) -> str:
    text = " ".join(str(value or "").replace("_", " ").replace("-", " ").upper().split())
    if "QUEUE" in text:
        return SIMPLE_QUEUE
    return text


def to_plan(row: dict[str, Any]) -> Plan | None:
    plan_id = as_int(row.get("id"))
    if plan_id is None:
        return None
    name = row.get("nombre")
    return Plan(
        plan_id=plan_id,
        name=name.strip() if isinstance(name, str) else "",
        type=_plan_type(row.get("tipo")),
    )


def _number_or_text(value: Any) -> float | str | None:
    """A JSON number as a float, a string stripped for parsing; anything else (booleans
    included: `true` is no price) None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    return value.strip() if isinstance(value, str) else None


def parse_price(value: Any) -> float | None:
    """`"40000.00"` → 40000.0, `"65.000"` → 65000.0 (kit/prices.py, the one price reader);
    blanks and non-numbers → None."""
    return read_price(value)


def parse_speed(value: Any) -> float | None:
    """A speed in Mbps: `"20"` → 20, `"10M"` → 10, `"512k"` → 0.5; anything else → None."""
    raw = _number_or_text(value)
    if not isinstance(raw, str):
        return raw
    match = _SPEED.fullmatch(raw)
    if match is None:
        return None
    number = float(match.group(1).replace(",", "."))
    unit = match.group(2).lower() if match.group(2) else None
    return round(number * _UNIT_TO_MBPS[unit], 3)


async def fetch_plans(gateway: UpstreamGateway, *, background: bool = False) -> list[Plan]:
    rows = await gateway.get_all_pages("api/plan-internet/", background=background)
    return [plan for row in rows if (plan := to_plan(row)) is not None]


async def fetch_detail(
    gateway: UpstreamGateway, plan: Plan, *, background: bool = False
) -> PlanDetail | None:
    """The detail of a PPPOE or SIMPLE QUEUE plan; None when the upstream does not know it.

    Other types (PCQ) have no detail endpoint: callers must not ask (`has_detail`).
    """
    path = DETAIL_PATHS[plan.type]
    try:
        body = await gateway.get_json(
            f"api/plan-internet/{path}/{plan.plan_id}/", background=background
        )
    except UpstreamRejected as exc:
        if exc.upstream_status == 404:
            return None
        raise
    if not isinstance(body, dict):
        raise UpstreamUnavailable()
    name = body.get("nombre")
    return PlanDetail(
        plan_id=plan.plan_id,
        name=name.strip() if isinstance(name, str) and name.strip() else plan.name,
        type=plan.type,
        price=parse_price(body.get("precio")),
        download_speed=parse_speed(body.get("bajada")),
        upload_speed=parse_speed(body.get("subida")),
    )
