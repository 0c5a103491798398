"""HTTP routes for clients (spec 4.3-4.6): parse, call one service method, wrap the envelope."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response

from isp_gateway.auth.dependencies import current_user
from isp_gateway.clients.schemas import (
    ClientResponse,
    UpdateClientRequest,
    VerificationResult,
    VerifyRequest,
)
from isp_gateway.clients.service import MSG_MISMATCH, MSG_VERIFIED, Found
from isp_gateway.envelope import BackendResponse, respond, success
from isp_gateway.runtime import RuntimeDep

router = APIRouter(prefix="/api/v1/clients", tags=["Clients"], dependencies=[Depends(current_user)])

STALE = {"stale": True}


def _meta(stale: bool) -> dict[str, Any] | None:
    return STALE if stale else None


def _found(found: Found) -> Response:
    # Returning a Response skips FastAPI's re-validation of a dict we built ourselves;
    # the response_model still documents the shape.
    return respond(200, success("client_found", found.client, meta=_meta(found.stale)))


@router.get("/", response_model=BackendResponse[list[ClientResponse]])
async def list_clients(runtime: RuntimeDep) -> Response:
    """List every active client (served from the client cache)."""
    payload, stale = await runtime.clients.list_active()
    meta = b'{"stale":true}' if stale else b"null"
    # The list is serialised once per cache generation; only the envelope is built here.
    body = (
        b'{"ok":true,"type":"success","action":"clients_listed","data":'
        + payload
        + b',"message":null,"meta":'
        + meta
        + b"}"
    )
    return Response(body, media_type="application/json")


@router.get("/search", response_model=BackendResponse[list[ClientResponse]])
async def search_clients(
    runtime: RuntimeDep,
    q: Annotated[str | None, Query(description="Words to find (all must match)")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Response:
    """Search clients by name, address, document, phone, city or locality."""
    found, stale = await runtime.clients.search(q, limit)
    action = "clients_listed" if found else "client_not_found"
    return respond(200, success(action, found, meta=_meta(stale)))


@router.get("/by-document/{document}", response_model=BackendResponse[ClientResponse])
async def get_client_by_document(document: str, runtime: RuntimeDep) -> Response:
    """Find a client by identity document."""
    return _found(await runtime.clients.by_document(document))


@router.get("/by-phone/{phone}", response_model=BackendResponse[ClientResponse])
async def get_client_by_phone(phone: str, runtime: RuntimeDep) -> Response:
    """Find a client by phone number (country code and symbols are ignored; URL-encode '+')."""
    return _found(await runtime.clients.by_phone(phone))


@router.get("/by-service-id/{service_id}", response_model=BackendResponse[ClientResponse])
async def get_client_by_service_id(service_id: str, runtime: RuntimeDep) -> Response:
    """Find a client by service id."""
    return _found(await runtime.clients.by_service_id_text(service_id))


@router.post("/resolve", response_model=BackendResponse[ClientResponse])
async def resolve_client(body: VerifyRequest, runtime: RuntimeDep) -> Response:
    """Identify and verify a client without a service id (at least 3 of the 4 fields)."""
    found = await runtime.clients.resolve(body)
    message = "Cliente identificado y verificado"
    return respond(
        200, success("client_verified", found.client, message=message, meta=_meta(found.stale))
    )


@router.post("/{service_id}/verify", response_model=BackendResponse[VerificationResult])
async def verify_client(service_id: int, body: VerifyRequest, runtime: RuntimeDep) -> Response:
    """Verify a client's identity from billing data (at least 3 of the 4 fields)."""
    result = await runtime.clients.verify(service_id, body)
    data: dict[str, Any] = {"is_valid": result.is_valid, "matched_fields": result.matched_fields}
    if result.is_valid:
        return respond(200, success("client_verified", data, message=MSG_VERIFIED))
    data["debug"] = result.debug
    return respond(200, success("client_verification_failed", data, message=MSG_MISMATCH))


@router.put("/{service_id}", response_model=BackendResponse[None])
async def update_client(
    service_id: int, body: UpdateClientRequest, runtime: RuntimeDep
) -> dict[str, Any]:
    """Update a client's document and/or phone."""
    await runtime.clients.update(service_id, body.document, body.phone)
    return success("client_updated", None, message="Client updated successfully")
