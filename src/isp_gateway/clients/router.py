"""HTTP routes for clients. STUB, to be built: thin handlers that call the service."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from isp_gateway.auth.dependencies import current_user

router = APIRouter(prefix="/api/v1/clients", tags=["Clients"], dependencies=[Depends(current_user)])
