"""POST /api/v1/auth/token (spec 4.2)."""

from __future__ import annotations

import hmac
from typing import Annotated, Any

import anyio.to_thread
from fastapi import APIRouter, Form, HTTPException, Request, status
from pydantic import BaseModel

from isp_gateway.auth.passwords import dummy_hash, verify_password
from isp_gateway.auth.tokens import issue_token
from isp_gateway.envelope import AuthError
from isp_gateway.runtime import RuntimeDep

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
        "description": f"Too many failed logins for this username or address: "
        f"`{{detail: '{THROTTLED}'}}`; or the service's request limit",
        "headers": {
            "Retry-After": {"description": "Seconds to wait", "schema": {"type": "integer"}}
        },
    },
}


@router.post("/token", response_model=TokenResponse, responses=_AUTH_RESPONSES)
async def issue_access_token(
    request: Request,
    runtime: RuntimeDep,
    username: Annotated[str, Form()],
    password: Annotated[str, Form()],
) -> TokenResponse:
    """Exchange the configured username and password for a Bearer token (form-encoded)."""
    settings = runtime.settings
    throttle = runtime.login_throttle
    address = request.client.host if request.client else "unknown"
    keys = [f"user:{username.lower()}", f"addr:{address}"]
    # Each attempt is counted before the slow bcrypt check, atomically, so parallel
    # guesses cannot all pass the check-then-count gap; a success clears the counts below.
    reserved: list[str] = []
    for key in keys:
        wait = await throttle.reserve(key)
        if wait is not None:
            for taken in reserved:
                await throttle.release(taken)
            raise HTTPException(
                status.HTTP_429_TOO_MANY_REQUESTS, THROTTLED, headers={"Retry-After": str(wait)}
            )
        reserved.append(key)
    known = hmac.compare_digest(username.encode(), settings.API_USERNAME.encode())
    # Unknown users are checked against a dummy hash so response time does not tell them apart.
    configured = settings.API_PASSWORD_HASH.get_secret_value()
    # Built (once) off the event loop: hashing is as slow as checking.
    hashed = configured if known else await anyio.to_thread.run_sync(dummy_hash, configured)
    valid = await verify_password(password, hashed) and known
    if not valid:
        # Already counted by `reserve`.
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED, LOGIN_ERROR, headers={"WWW-Authenticate": "Bearer"}
        )
    for key in keys:
        await throttle.success(key)
    return TokenResponse(access_token=issue_token(settings, settings.API_USERNAME))
