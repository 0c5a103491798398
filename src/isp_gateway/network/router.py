"""HTTP routes for ping diagnostics (spec 4.12-4.13): thin handlers over PingService."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter

from isp_gateway.auth.dependencies import Scoped
from isp_gateway.auth.keys import NETWORK_PING
from isp_gateway.kit.actions import Action
from isp_gateway.network.schemas import (
    PingCreated,
    PingFigures,
    PingPending,
    PingRequest,
)
from isp_gateway.network.service import PingService
from isp_gateway.web.deps import ServiceOf
from isp_gateway.web.envelope import BackendResponse, error_responses, success, view_envelope
from isp_gateway.web.params import ServiceIdPath, WaitQuery, parse_service_id, service_route_errors

PingsDep = Annotated[PingService, ServiceOf(PingService)]

router = APIRouter(prefix="/api/v1", tags=["network"], dependencies=[Scoped(NETWORK_PING)])


# Both spellings answer directly: a redirect would make a bot's POST lose its body.
@router.post(
    "/{service_id}/ping/",
    response_model=BackendResponse[PingCreated],
    responses=service_route_errors(
        [Action.PING_FAILED, Action.UPSTREAM_UNAVAILABLE, Action.UPSTREAM_UNAUTHORIZED]
    ),
)
@router.post("/{service_id}/ping", include_in_schema=False)
async def create_ping(
    service_id: ServiceIdPath, body: PingRequest, pings: PingsDep
) -> dict[str, Any]:
    """Start a remote ping of the customer's device; poll the result with the task id."""
    started = await pings.create(parse_service_id(service_id), body.pings)
    return success(Action.PING_CREATED, {"task_id": started.task_id})


@router.get(
    "/ping/{task_id}/",
    response_model=BackendResponse[PingPending | PingFigures],
    responses=error_responses(404, 502, 503, actions={404: Action.PING_FAILED}),
)
@router.get("/ping/{task_id}", include_in_schema=False)
async def get_ping_result(task_id: str, pings: PingsDep, wait: WaitQuery = 0) -> dict[str, Any]:
    """Result of a ping task (`ping_pending` while it runs); `wait` long-polls up to 25 s."""
    view = await pings.result(task_id, wait)
    return view_envelope(view)
