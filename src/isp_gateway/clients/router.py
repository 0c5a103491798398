"""HTTP routes for clients (spec 4.3-4.6): parse, call one service method, wrap the envelope."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from isp_gateway.auth.dependencies import Scoped
from isp_gateway.auth.keys import CLIENTS_READ, CLIENTS_VERIFY, CLIENTS_WRITE
from isp_gateway.clients.identity import MISMATCH_VARIANT, VERIFIED_VARIANT, IdentityService
from isp_gateway.clients.schemas import (
    DOCUMENT_PATTERN,
    PHONE_PATTERN,
    ClientResponse,
    ResolvedIdentity,
    UpdateClientRequest,
    VerificationResult,
    VerifyRequest,
)
from isp_gateway.clients.service import ClientService, Found
from isp_gateway.clients.update import UpdateService
from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.kit.models import NON_BLANK
from isp_gateway.web.deps import ServiceOf
from isp_gateway.web.envelope import (
    BackendResponse,
    encode,
    error_responses,
    respond,
    success,
)
from isp_gateway.web.params import VERIFICATION_ERRORS, VERIFIED, ServiceIdPath, parse_service_id

ClientsDep = Annotated[ClientService, ServiceOf(ClientService)]
IdentityDep = Annotated[IdentityService, ServiceOf(IdentityService)]
UpdatesDep = Annotated[UpdateService, ServiceOf(UpdateService)]

router = APIRouter(prefix="/api/v1/clients", tags=["Clients"])

STALE = {"stale": True}

# Our key refused upstream: spec 5.2's CLIENT_NOT_FOUND (502) on every client endpoint.
UPSTREAM = [Action.UPSTREAM_UNAVAILABLE, Action.UPSTREAM_REFUSED_CLIENT_FETCH]
NOT_FOUND = Action.CLIENT_NOT_FOUND
# The routes that need the whole client list: during its first load, 503 `loading`.
LOADING = [Action.UPSTREAM_RATE_LIMITED, Action.LOADING]
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
        return respond(200, success(Action.CLIENT_FOUND, found.client, meta=_meta(found.stale)))
    meta: dict[str, Any] = {"other_service_ids": found.others}
    if found.stale:
        meta["stale"] = True
    return respond(200, success(Action.CLIENT_FOUND, found.client, meta=meta))


@router.get(
    "/",
    dependencies=[Scoped(CLIENTS_READ)],
    response_model=BackendResponse[list[ClientResponse]],
    responses=error_responses(
        500, 502, 503, actions={502: Action.UPSTREAM_REFUSED_CLIENT_FETCH, 503: LOADING}
    ),
)
async def list_clients(clients: ClientsDep) -> Response:
    """List every active client (served from the client cache)."""
    payload, stale = await clients.list_active()
    # The list is serialised once per cache generation; only the envelope is built here.
    return _listed(Action.CLIENTS_LISTED, payload, stale)


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
    responses=error_responses(
        400, 502, 503, actions={400: Action.ERROR, 502: UPSTREAM, 503: LOADING}
    ),
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
    return _listed(
        Action.CLIENTS_LISTED if count else Action.CLIENT_NOT_FOUND, payload, stale, meta
    )


@_lookup("/by-document/{document}", Action.INVALID_DOCUMENT)
async def get_client_by_document(document: DocumentPath, clients: ClientsDep) -> Response:
    """Find a client by identity document."""
    return _found(await clients.by_document(document))


@_lookup("/by-phone/{phone}", Action.INVALID_PHONE)
async def get_client_by_phone(phone: PhonePath, clients: ClientsDep) -> Response:
    """Find a client by phone number (country code and symbols are ignored; URL-encode '+')."""
    return _found(await clients.by_phone(phone))


@_lookup("/by-service-id/{service_id}", Action.INVALID_SERVICE_ID)
async def get_client_by_service_id(service_id: ServiceIdPath, clients: ClientsDep) -> Response:
    """Find a client by service id."""
    return _found(await clients.by_service_id_text(service_id))


@router.post(
    "/resolve",
    dependencies=[Scoped(CLIENTS_VERIFY)],
    response_model=BackendResponse[ClientResponse | ResolvedIdentity],
    responses=error_responses(
        400,
        404,
        409,
        429,
        502,
        503,
        actions={
            400: Action.CLIENT_VERIFICATION_FAILED,
            404: [NOT_FOUND, Action.CLIENT_VERIFICATION_FAILED],
            409: Action.CLIENT_AMBIGUOUS,
            429: [Action.CLIENT_VERIFICATION_LOCKED, Action.IDENTITY_RATE_LIMITED],
            502: UPSTREAM,
            503: LOADING,
        },
    ),
)
async def resolve_client(body: VerifyRequest, identity: IdentityDep) -> Response:
    """Identify and verify a client without a service id. `IDENTITY_POLICY=spec`: at least
    3 of the 4 fields, and the answer is the client's record. `strict`: the name, the
    address and the plan (name or price), and the answer is `service_ids` and a
    `verification_id` only (400 `data.missing` names what is lacking). Each caller may
    resolve at most CALLER_RESOLVES_PER_HOUR distinct services an hour (429
    `identity_rate_limited`)."""
    found = await identity.resolve(body)
    message = messages.say(Action.CLIENT_VERIFIED, "resolve")
    meta = _meta(found.stale)
    if not identity.strict:
        return respond(
            200, success(Action.CLIENT_VERIFIED, found.client, message=message, meta=meta)
        )
    service_id = found.client["service_id"]
    data = {
        "service_ids": [service_id],
        "verification_id": await identity.rest_verification_id(service_id),
    }
    return respond(200, success(Action.CLIENT_VERIFIED, data, message=message, meta=meta))


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
            400: [Action.CLIENT_VERIFICATION_FAILED, Action.INVALID_SERVICE_ID],
            404: NOT_FOUND,
            429: Action.CLIENT_VERIFICATION_LOCKED,
            502: UPSTREAM,
        },
    ),
)
async def verify_client(
    service_id: ServiceIdPath, body: VerifyRequest, identity: IdentityDep
) -> Response:
    """Verify a client's identity from billing data. `IDENTITY_POLICY=spec`: at least 3 of
    the 4 fields; a mismatch carries `debug`. `strict`: the name, the address and the plan
    (name or price), the name by two of its words and the address by the name of its place
    (a first name, `el`, `casa` or a house number alone match no one); a mismatch carries
    `attempts_left`, never a value of the record. A success always carries
    `verification_id`."""
    result = await identity.verify(parse_service_id(service_id), body)
    data: dict[str, Any] = {"is_valid": result.is_valid, "matched_fields": result.matched_fields}
    if result.is_valid:
        verification_id = await identity.rest_verification_id(parse_service_id(service_id))
        if verification_id is not None:
            data["verification_id"] = verification_id
        message = messages.say(Action.CLIENT_VERIFIED, VERIFIED_VARIANT)
        return respond(200, success(Action.CLIENT_VERIFIED, data, message=message))
    if result.attempts_left is not None:  # strict
        data["attempts_left"] = result.attempts_left
    else:
        data["debug"] = result.debug
    message = messages.say(Action.CLIENT_VERIFICATION_FAILED, MISMATCH_VARIANT)
    return respond(200, success(Action.CLIENT_VERIFICATION_FAILED, data, message=message))


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
                    Action.CLIENT_UPDATE_FAILED,
                    Action.INVALID_DOCUMENT,
                    Action.INVALID_PHONE,
                    Action.INVALID_SERVICE_ID,
                ],
                404: NOT_FOUND,
                # Spec 4.6 rule 5: the upstream refused or failed the update.
                500: Action.CLIENT_UPDATE_FAILED,
                502: Action.UPSTREAM_REFUSED_CLIENT_FETCH,
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
    return success(Action.CLIENT_UPDATED, None, message=messages.say(Action.CLIENT_UPDATED, "rest"))
