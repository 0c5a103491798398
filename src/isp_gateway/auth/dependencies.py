"""The CurrentUser dependency: a valid Bearer token or 401 in the spec's exact shape."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, status
from fastapi.security import OAuth2PasswordBearer

from isp_gateway.auth.tokens import InvalidToken, verify_token
from isp_gateway.runtime import RuntimeDep

# auto_error=False: we answer a missing header ourselves with the spec's message.
oauth2_scheme = OAuth2PasswordBearer(tokenUrl="/api/v1/auth/token", auto_error=False)

CREDENTIALS_ERROR = "Could not validate credentials."


def _unauthorized() -> HTTPException:
    return HTTPException(
        status_code=status.HTTP_401_UNAUTHORIZED,
        detail=CREDENTIALS_ERROR,
        headers={"WWW-Authenticate": "Bearer"},
    )


async def current_user(
    runtime: RuntimeDep, token: Annotated[str | None, Depends(oauth2_scheme)]
) -> str:
    if not token:
        raise _unauthorized()
    try:
        return verify_token(runtime.settings, token, runtime.token_cache)
    except InvalidToken:
        raise _unauthorized() from None


CurrentUser = Annotated[str, Depends(current_user)]
