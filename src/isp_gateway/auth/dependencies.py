"""The CurrentCaller dependency: a valid credential (an API key or a Bearer token) or 401 in
the spec's exact shape, resolved into the Caller (CALLERS.md 1): who asks, for whom, from
where, with which scopes; and `Scoped(scope)`, the one scope check of a route
(CALLERS.md 3)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Header, HTTPException, Request, Security, status
from fastapi.exceptions import RequestValidationError
from fastapi.security import APIKeyHeader, OAuth2PasswordBearer, SecurityScopes

from isp_gateway.auth.credentials import (
    CREDENTIALS_ERROR,
    END_USER_ERROR,
    BadEndUser,
    Gatekeeper,
    Unauthenticated,
    authenticate,
)
from isp_gateway.auth.keys import (
    SCOPES,
    InsufficientScope,
    require_scope,
)
from isp_gateway.kit.callers import END_USER_HEADER, MAX_END_USER_LENGTH, Caller

# auto_error=False: we answer a missing header ourselves with the spec's message.
oauth2_scheme = OAuth2PasswordBearer(
    tokenUrl="/api/v1/auth/token",
    auto_error=False,
    # Declared so /docs and the document name every scope; the JWT user holds them all.
    scopes={scope: f"the scope {scope}" for scope in SCOPES},
    description="The spec's login: username and password for a Bearer token (all scopes).",
)
# The other way in (CALLERS.md 3): an API key, also accepted as `Authorization: Bearer igw_...`.
api_key_scheme = APIKeyHeader(
    name="X-API-Key",
    auto_error=False,
    description="An API key (`igw_...`) made with `isp-gateway keys create`; it holds only "
    "its own scopes. Also accepted as `Authorization: Bearer igw_...`.",
)


def _unauthorized() -> HTTPException:
    return HTTPException(
        status_code=status.HTTP_401_UNAUTHORIZED,
        detail=CREDENTIALS_ERROR,
        headers={"WWW-Authenticate": "Bearer"},
    )


def gatekeeper(request: Request) -> Gatekeeper:
    """The running service as the credential check sees it (app.state.runtime)."""
    runtime: Gatekeeper = request.app.state.runtime
    return runtime


async def current_caller(
    request: Request,
    # Both schemes are read by credentials.authenticate (from the headers); declared here so
    # the document and /docs offer them.
    _token: Annotated[str | None, Depends(oauth2_scheme)],
    _api_key: Annotated[str | None, Depends(api_key_scheme)],
    # Declared here so every protected operation documents it; read and checked below, after
    # the token (an anonymous request is 401 whatever it sends).
    end_user: Annotated[
        str | None,
        Header(
            alias=END_USER_HEADER,
            description="The person the bot talks to (opaque, e.g. a hash of a chat id; "
            f"1-{MAX_END_USER_LENGTH} printable ASCII characters). Throttles and fair "
            "shares count per end user; absent, the end user is the caller itself.",
            json_schema_extra={"maxLength": MAX_END_USER_LENGTH, "pattern": "^[ -~]+$"},
        ),
    ] = None,
) -> Caller:
    address = request.client.host if request.client else "unknown"
    try:
        return await authenticate(gatekeeper(request), request.headers, address)
    except Unauthenticated:
        raise _unauthorized() from None
    except BadEndUser:
        raise RequestValidationError(
            [
                {
                    "type": "value_error",
                    "loc": ("header", END_USER_HEADER),
                    "msg": END_USER_ERROR,
                    "input": None,  # never echoed
                }
            ]
        ) from None


CurrentCaller = Annotated[Caller, Depends(current_caller)]


async def scoped_caller(
    security_scopes: SecurityScopes, request: Request, caller: CurrentCaller
) -> Caller:
    """The route's scope (given by `Scoped`), or 403 `insufficient_scope`, counted in the
    audit as `scope_denied`."""
    for required in security_scopes.scopes:
        try:
            require_scope(caller.scopes, required)
        except InsufficientScope:
            route = request.scope.get("route")
            # Counted, not stored one by one (CALLERS.md 6): one event per caller, scope
            # and minute, with the first refusal's details and `details.count`.
            gatekeeper(request).audit.count(
                "scope_denied",
                "denied",
                kind=required,
                details={
                    "required": required,
                    "method": request.method,
                    # The route's template, never the path (it may hold a document).
                    "route": getattr(route, "path", None),
                },
            )
            raise
    return caller


def Scoped(scope: str) -> Any:
    """The dependency that lets a route through only for a caller holding `scope` (or "*"):
    `dependencies=[Scoped(CLIENTS_READ)]` on a route or router, or a parameter
    `caller: Annotated[Caller, Scoped(CLIENTS_READ)]`. It resolves the caller (401 without a
    valid credential) and puts the scope into the OpenAPI document."""
    return Security(scoped_caller, scopes=[scope])
