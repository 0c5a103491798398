"""GET /api/v1/audit (CALLERS.md 4): the newest audit events, filtered, newest first
(scope `audit:read`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel

from isp_gateway.audit.service import AuditEventName, AuditLog, get_audit_log
from isp_gateway.auth.dependencies import Scoped
from isp_gateway.auth.keys import AUDIT_READ
from isp_gateway.kit.actions import Action
from isp_gateway.web.envelope import BackendResponse, error_responses, success

router = APIRouter(prefix="/api/v1/audit", tags=["system"], dependencies=[Scoped(AUDIT_READ)])

MAX_LIMIT = 500


class AuditEvent(BaseModel):
    time: str
    event: AuditEventName
    outcome: str
    caller: str | None
    end_user: str | None
    address: str | None
    request_id: str | None
    service_id: int | str | None
    details: dict[str, Any]


AuditDep = Annotated[AuditLog, Depends(get_audit_log)]


@router.get(
    "",
    response_model=BackendResponse[list[AuditEvent]],
    responses=error_responses(503, actions={503: Action.STORE_UNAVAILABLE}),
)
@router.get("/", include_in_schema=False)
async def list_audit_events(
    audit: AuditDep,
    service_id: Annotated[
        int | None, Query(ge=1, le=9_999_999_999, description="Events about this service")
    ] = None,
    caller: Annotated[
        str | None,
        Query(min_length=1, max_length=140, description="`jwt:<user>` or an API key's name"),
    ] = None,
    event: Annotated[AuditEventName | None, Query(description="One kind of event")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 100,
) -> dict[str, Any]:
    """Who did what: the newest audit events matching every filter given, newest first
    (scope `audit:read`). Documents and phones appear as `***` and their last two digits."""
    events = await audit.query(service_id=service_id, caller=caller, event=event, limit=limit)
    return success(Action.AUDIT_LISTED, events, meta={"count": len(events)})
