"""Who is asking (CALLERS.md 1 and 3): the one place a request's credential becomes a `Caller`.

REST (auth/dependencies.py), the MCP endpoint (mcp/auth.py) and the service rate limiter all
read credentials here, so a key, a JWT and X-End-User-Id mean the same thing everywhere. The
lookup edge (clients/fastpath.py) reads raw header bytes for speed, but with the same
`bearer` rule and the same key ring.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from isp_gateway.auth.keys import JWT_SCOPES, KeyRing, enforce_key_rate, presented_key
from isp_gateway.auth.tokens import InvalidToken, TokenCache, verify_token
from isp_gateway.kit.actions import Action
from isp_gateway.kit.callers import END_USER_HEADER, MAX_END_USER_LENGTH, Caller, set_current_caller
from isp_gateway.kit.errors import Locked
from isp_gateway.kit.recorder import Recorder
from isp_gateway.kit.storage import Store
from isp_gateway.settings import Settings


class Gatekeeper(Protocol):
    """What reading a credential needs of the running service (services.Runtime is one):
    the settings (the JWT secret), the key ring, the verified-token cache, the store (a
    key's own rate) and the audit (a refused credential, rate or scope)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def key_ring(self) -> KeyRing: ...
    @property
    def token_cache(self) -> TokenCache: ...
    @property
    def store(self) -> Store: ...
    @property
    def audit(self) -> Recorder: ...


class Unauthenticated(Exception):
    """No valid credential: answered 401 `Could not validate credentials.` everywhere."""


class BadEndUser(Exception):
    """An X-End-User-Id that is not 1-128 printable ASCII characters (422)."""


END_USER_ERROR = f"must be 1 to {MAX_END_USER_LENGTH} printable ASCII characters"
CREDENTIALS_ERROR = "Could not validate credentials."


def refused_credential(runtime: Gatekeeper, address: str) -> None:
    """Called once for every refused credential (a 401), wherever it is refused (the regular
    dependency, MCP, the lookup edge): counted in the audit (CALLERS.md 6) in this worker's
    memory only, so a flood of bad credentials costs no store call and no log line each."""
    runtime.audit.count("unauthorized", "refused", anonymous_from=address)


def bearer(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, else None."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def valid_end_user(value: str) -> bool:
    """1 to 128 printable ASCII characters (space to tilde)."""
    return 0 < len(value) <= MAX_END_USER_LENGTH and value.isascii() and value.isprintable()


def _end_user(value: str | None, caller: str) -> str:
    if value is None:
        return caller
    if not valid_end_user(value):
        raise BadEndUser()
    return value


def _unauthenticated(runtime: Gatekeeper, address: str) -> Unauthenticated:
    """A 401, counted (`refused_credential`)."""
    refused_credential(runtime, address)
    return Unauthenticated()


def jwt_subject(runtime: Gatekeeper, authorization: str | None) -> str | None:
    """The subject of a valid JWT in an Authorization header, else None (no 401 here: for
    code that only needs to know who it is, such as the per-subject rate limit)."""
    token = bearer(authorization)
    if token is None:
        return None
    try:
        return verify_token(runtime.settings, token, runtime.token_cache)
    except InvalidToken:
        return None


async def authenticate(runtime: Gatekeeper, headers: Mapping[str, str], address: str) -> Caller:
    """The request's Caller, also set as the request's current caller; raises
    Unauthenticated (checked first: an anonymous request is 401 whatever else it sends) or
    BadEndUser. A key is looked for first, so `Bearer igw_...` is never read as a JWT; a key
    past its own rate raises its 429."""
    end_user = headers.get(END_USER_HEADER)
    presented = presented_key(headers)
    if presented is not None:
        found = runtime.key_ring.lookup(presented)
        if found is None:  # unknown, revoked, malformed, or keys are off: as a bad JWT
            raise _unauthenticated(runtime, address)
        caller = Caller(found.name, _end_user(end_user, found.name), address, found.scopes)
        set_current_caller(caller)
        try:
            await enforce_key_rate(runtime.store, found)
        except Locked:
            runtime.audit.count(Action.RATE_LIMITED, "refused", caller=caller)
            raise
        return caller
    authorization = headers.get("authorization")
    subject = jwt_subject(runtime, authorization)
    if subject is None:
        raise _unauthenticated(runtime, address)
    name = f"jwt:{subject}"
    caller = Caller(name, _end_user(end_user, name), address, JWT_SCOPES)
    set_current_caller(caller)
    return caller
