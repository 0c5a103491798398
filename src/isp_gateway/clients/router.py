"""HTTP routes for clients (spec 4.3-4.6): parse, call one service method, wrap the envelope."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from isp_gateway.auth.dependencies import Scoped
from isp_gateway.auth.keys import CLIENTS_READ, CLIENTS_VERIFY, CLIENTS_WRITE
from isp_gateway.clients.identity import MSG_MISMATCH, MSG_VERIFIED
from isp_gateway.clients.schemas import (
    DOCUMENT_PATTERN,
    PHONE_PATTERN,
    ClientResponse,
    UpdateClientRequest,
    VerificationResult,
    VerifyRequest,
)
from isp_gateway.clients.service import Found
from isp_gateway.kit.models import NON_BLANK
from isp_gateway.services import ClientsDep, IdentityDep, UpdatesDep
from isp_gateway.web.envelope import (
    BackendResponse,
    encode,
    error_responses,
    respond,
    success,
)
from isp_gateway.web.params import VERIFICATION_ERRORS, VERIFIED, ServiceIdPath, parse_service_id

router = APIRouter(prefix="/api/v1/clients", tags=["Clients"])

STALE = {"stale": True}

# Our key refused upstream: spec 5.2's CLIENT_NOT_FOUND (502) on every client endpoint.
UPSTREAM = ["upstream_unavailable", "CLIENT_NOT_FOUND"]
NOT_FOUND = "client_not_found"
# The routes that need the whole client list: during its first load, 503 `loading`.
LOADING = ["upstream_rate_limited", "loading"]
Handler = Callable[..., Awaitable[Response]]


def _lookup(path: str, invalid: str) -> Callable[[Handler], Handler]:
    """A lookup route: its errors are the value's own 400 action, then not found and the
    upstream's."""
    return router.get(
        path,
        dependencies=[Scoped(CLIENTS_READ)],
        response_model=BackendResponse[ClientResponse],
        responses=error_responses(
            400, 404, 502, 503, actions={400: invalid, 404: NOT_FOUND, 502: UPSTREAM}
        ),
    )


DocumentPath = Annotated[
    str,
    Path(
        description="3 to 20 ASCII letters or digits (no dots or dashes)",
        json_schema_extra={"pattern": DOCUMENT_PATTERN},
    ),
]
PhonePath = Annotated[
    str,
    Path(
        description="At least 7 digits, the first not 0; a country code, spaces, "
        "'+' (URL-encoded as %2B), '(', ')', '.' and '-' are allowed",
        json_schema_extra={"pattern": PHONE_PATTERN},
    ),
]

# The search parameter is read by the route itself: a missing `q` is 400 `error` (spec 4.3),
# not the 422 FastAPI gives a missing required parameter; the document still declares it.
Q_PARAMETER = {
    "name": "q",
    "in": "query",
    "required": True,
    "description": "Words to find (all must match); not blank",
    "schema": {"type": "string", "minLength": 1, "pattern": NON_BLANK},
}


def _meta(stale: bool) -> dict[str, Any] | None:
    return STALE if stale else None


def _found(found: Found) -> Response:
    # Returning a Response skips FastAPI's re-validation of a dict we built ourselves;
    # the response_model still documents the shape. By document or phone, `meta` names the
    # other services sharing the value (the lookup edge renders the same bytes).
    if found.others is None:
        return respond(200, success("client_found", found.client, meta=_meta(found.stale)))
    meta: dict[str, Any] = {"other_service_ids": found.others}
    if found.stale:
        meta["stale"] = True
    return respond(200, success("client_found", found.client, meta=meta))


@router.get(
    "/",
    dependencies=[Scoped(CLIENTS_READ)],
    response_model=BackendResponse[list[ClientResponse]],
    responses=error_responses(500, 502, 503, actions={502: "CLIENT_NOT_FOUND", 503: LOADING}),
)
async def list_clients(clients: ClientsDep) -> Response:
    """List every active client (served from the client cache)."""
    payload, stale = await clients.list_active()
    # The list is serialised once per cache generation; only the envelope is built here.
    return _listed("clients_listed", payload, stale)


def _listed(
    action: str, payload: bytes, stale: bool, meta: dict[str, Any] | None = None
) -> Response:
    """The envelope around a pre-serialised JSON array of clients; `meta` (`total`, ...)
    carries `stale` after its own members."""
    if stale:
        meta = {**(meta or {}), **STALE}
    body = encode(success(action, None, meta=meta), data_json=payload)
    return Response(body, media_type="application/json")


@router.get(
    "/search",
    dependencies=[Scoped(CLIENTS_READ)],
    response_model=BackendResponse[list[ClientResponse]],
    responses=error_responses(400, 502, 503, actions={400: "error", 502: UPSTREAM, 503: LOADING}),
    openapi_extra={"parameters": [Q_PARAMETER]},
)
async def search_clients(
    request: Request,
    clients: ClientsDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> Response:
    """Search clients by name, address, document, phone, city or locality."""
    q = request.query_params.get("q")
    payload, count, total, stale = await clients.search(q, limit)
    # CALLERS.md 2: how many match in all, and whether this page left some out.
    meta = {"total": total, "has_more": total > count}
    return _listed("clients_listed" if count else "client_not_found", payload, stale, meta)


@_lookup("/by-document/{document}", "invalid_document")
async def get_client_by_document(document: DocumentPath, clients: ClientsDep) -> Response:
    """Find a client by identity document."""
    return _found(await clients.by_document(document))


@_lookup("/by-phone/{phone}", "invalid_phone")
async def get_client_by_phone(phone: PhonePath, clients: ClientsDep) -> Response:
    """Find a client by phone number (country code and symbols are ignored; URL-encode '+')."""
    return _found(await clients.by_phone(phone))


@_lookup("/by-service-id/{service_id}", "invalid_service_id")
async def get_client_by_service_id(service_id: ServiceIdPath, clients: ClientsDep) -> Response:
    """Find a client by service id."""
    return _found(await clients.by_service_id_text(service_id))


@router.post(
    "/resolve",
    dependencies=[Scoped(CLIENTS_VERIFY)],
    response_model=BackendResponse[ClientResponse],
    responses=error_responses(
        400,
        404,
        409,
        429,
        502,
        503,
        actions={
            400: "client_verification_failed",
            404: [NOT_FOUND, "client_verification_failed"],
            409: "client_ambiguous",
            429: "client_verification_locked",
            502: UPSTREAM,
            503: LOADING,
        },
    ),
)
async def resolve_client(body: VerifyRequest, identity: IdentityDep) -> Response:
    """Identify and verify a client without a service id (at least 3 of the 4 fields)."""
    found = await identity.resolve(body)
    message = "Cliente identificado y verificado"
    return respond(
        200, success("client_verified", found.client, message=message, meta=_meta(found.stale))
    )


@router.post(
    "/{service_id}/verify",
    dependencies=[Scoped(CLIENTS_VERIFY)],
    response_model=BackendResponse[VerificationResult],
    responses=error_responses(
        400,
        404,
        429,
        502,
        503,
        actions={
            400: ["client_verification_failed", "invalid_service_id"],
            404: NOT_FOUND,
            429: "client_verification_locked",
            502: UPSTREAM,
        },
    ),
)
async def verify_client(
    service_id: ServiceIdPath, body: VerifyRequest, identity: IdentityDep
) -> Response:
    """Verify a client's identity from billing data (at least 3 of the 4 fields)."""
    result = await identity.verify(parse_service_id(service_id), body)
    data: dict[str, Any] = {"is_valid": result.is_valid, "matched_fields": result.matched_fields}
    if result.is_valid:
        verification_id = await identity.rest_verification_id(parse_service_id(service_id))
        if verification_id is not None:
            data["verification_id"] = verification_id
        return respond(200, success("client_verified", data, message=MSG_VERIFIED))
    data["debug"] = result.debug
    return respond(200, success("client_verification_failed", data, message=MSG_MISMATCH))


@router.put(
    "/{service_id}",
    # The scope first, then the verification binding (CALLERS.md 5).
    dependencies=[Scoped(CLIENTS_WRITE), VERIFIED],
    response_model=BackendResponse[None],
    responses={
        **error_responses(
            400,
            404,
            500,
            502,
            503,
            actions={
                400: [
                    "client_update_failed",
                    "invalid_document",
                    "invalid_phone",
                    "invalid_service_id",
                ],
                404: NOT_FOUND,
                # Spec 4.6 rule 5: the upstream refused or failed the update.
                500: "client_update_failed",
                502: "CLIENT_NOT_FOUND",
            },
        ),
        **VERIFICATION_ERRORS,
    },
)
async def update_client(
    service_id: ServiceIdPath, body: UpdateClientRequest, updates: UpdatesDep
) -> dict[str, Any]:
    """Update a client's document and/or phone."""
    await updates.update(parse_service_id(service_id), body.document, body.phone)
    return success("client_updated", None, message="Client updated successfully")
