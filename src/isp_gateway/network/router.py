"""HTTP routes for ping diagnostics (spec 4.12-4.13): thin handlers over PingService."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from isp_gateway.auth.dependencies import current_user
from isp_gateway.envelope import BackendResponse, envelope, error_responses, success
from isp_gateway.network.schemas import (
    MAX_WAIT_SECONDS,
    PingCreated,
    PingFigures,
    PingPending,
    PingRequest,
)
from isp_gateway.runtime import RuntimeDep

router = APIRouter(prefix="/api/v1", tags=["network"], dependencies=[Depends(current_user)])

WaitQuery = Annotated[
    float,
    Query(
        ge=0,
        le=MAX_WAIT_SECONDS,
        description="Hold the answer up to this many seconds until the result is final.",
    ),
]


# Both spellings answer directly: a redirect would make a bot's POST lose its body.
@router.post(
    "/{service_id}/ping/",
    response_model=BackendResponse[PingCreated],
    responses=error_responses(
        404,
        502,
        503,
        actions={
            404: "client_not_found",
            502: ["ping_failed", "upstream_unavailable", "upstream_unauthorized"],
        },
    ),
)
@router.post("/{service_id}/ping", include_in_schema=False)
async def create_ping(service_id: int, body: PingRequest, runtime: RuntimeDep) -> dict[str, Any]:
    """Start a remote ping of the customer's device; poll the result with the task id."""
    task_id = await runtime.pings.create(service_id, body.pings)
    return success("ping_created", {"task_id": task_id})


@router.get(
    "/ping/{task_id}/",
    response_model=BackendResponse[PingPending | PingFigures],
    responses=error_responses(404, 502, 503, actions={404: "ping_failed"}),
)
@router.get("/ping/{task_id}", include_in_schema=False)
async def get_ping_result(task_id: str, runtime: RuntimeDep, wait: WaitQuery = 0) -> dict[str, Any]:
    """Result of a ping task (`ping_pending` while it runs); `wait` long-polls up to 25 s."""
    view = await runtime.pings.result(task_id, wait)
    return envelope(
        ok=view.ok, type=view.type, action=view.action, data=view.data, message=view.message
    )
