"""Who calls /mcp: the same credentials as REST (auth/credentials.py), resolved into a
`Caller` that carries its scopes; a tool whose scope the caller lacks is neither listed nor
callable."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.datastructures import Headers

from isp_gateway.auth import credentials
from isp_gateway.auth.credentials import BadEndUser, Unauthenticated
from isp_gateway.auth.keys import has_scope
from isp_gateway.kit.callers import Caller

if TYPE_CHECKING:
    from starlette.types import Scope

    from isp_gateway.services import Runtime

__all__ = ["BadEndUser", "Unauthenticated", "allows", "authenticate", "scopes_of"]


async def authenticate(runtime: Runtime, scope: Scope) -> Caller:
    """The caller of an /mcp request, or Unauthenticated (BadEndUser for a bad header; a
    key past its own rate raises its 429)."""
    client = scope.get("client")
    address = str(client[0]) if client else "unknown"
    return await credentials.authenticate(runtime, Headers(scope=scope), address)


def scopes_of(caller: Caller) -> frozenset[str]:
    """The scopes the caller's credential grants (the spec's JWT user has `*`)."""
    return frozenset(caller.scopes)


def allows(scopes: frozenset[str], scope: str) -> bool:
    return has_scope(scopes, scope)
