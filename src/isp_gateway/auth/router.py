"""POST /api/v1/auth/token (spec 4.2): renders what auth/service.py decides."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, HTTPException, Request, status
from pydantic import BaseModel

from isp_gateway.auth.service import AuthService
from isp_gateway.web.deps import ServiceOf
from isp_gateway.web.envelope import AuthError

AuthDep = Annotated[AuthService, ServiceOf(AuthService)]

router = APIRouter(prefix="/api/v1/auth", tags=["system"])

LOGIN_ERROR = "Incorrect username or password."
THROTTLED = "Too many failed login attempts."


class TokenResponse(BaseModel):
    access_token: str
    token_type: str = "bearer"  # noqa: S105 - the OAuth2 token type, not a secret


_AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {
        "model": AuthError,
        "description": f"Wrong username or password: `{{detail: '{LOGIN_ERROR}'}}`",
        "headers": {"WWW-Authenticate": {"description": "Bearer", "schema": {"type": "string"}}},
    },
    422: {
        "model": AuthError,
        "description": "`username` or `password` missing: `{detail}` naming the form fields",
    },
    429: {
        "model": AuthError,
        "description": f"Too many failed logins for this username from this address (or "
        f"from everywhere, for an address that has not logged in as it lately): "
        f"`{{detail: '{THROTTLED}'}}`; or the service's request limit",
        "headers": {
            "Retry-After": {"description": "Seconds to wait", "schema": {"type": "integer"}}
        },
    },
}


@router.post("/token", response_model=TokenResponse, responses=_AUTH_RESPONSES)
async def issue_access_token(
    request: Request,
    auth: AuthDep,
    username: Annotated[str, Form()],
    password: Annotated[str, Form()],
) -> TokenResponse:
    """Exchange the configured username and password for a Bearer token (form-encoded)."""
    address = request.client.host if request.client else "unknown"
    outcome = await auth.login(username, password, address)
    if outcome.token is not None:
        return TokenResponse(access_token=outcome.token)
    if outcome.retry_after is not None:
        raise HTTPException(
            status.HTTP_429_TOO_MANY_REQUESTS,
            THROTTLED,
            headers={"Retry-After": str(outcome.retry_after)},
        )
    raise HTTPException(
        status.HTTP_401_UNAUTHORIZED, LOGIN_ERROR, headers={"WWW-Authenticate": "Bearer"}
    )
