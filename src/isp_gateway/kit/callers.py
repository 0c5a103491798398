"""Who is asking (CALLERS.md 1): the caller (the credential) and the end user (the person
the bot talks to), resolved once at the edge into one small value.

Throttles, fair shares, scopes, verification bindings and the audit key on it; no feature
parses the headers itself. The value is also kept in a context variable for the duration of
the request, so code far below the routers (the upstream budget's fair share) can read it
without every signature in between carrying it.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

END_USER_HEADER = "X-End-User-Id"
MAX_END_USER_LENGTH = 128


@dataclass(frozen=True, slots=True)
class Caller:
    # "jwt:<sub>" for the spec's JWT user, the key's name for an API key.
    caller: str
    # X-End-User-Id when the bot named one, else the caller itself.
    end_user: str
    # The client address as the server saw it (after trusted proxy headers).
    address: str
    # What the credential may do (CALLERS.md 3): an API key's scopes, the JWT user's "*"
    # (set by auth/dependencies.current_caller). None unless given: a Caller built
    # elsewhere is never granted a scope by default.
    scopes: frozenset[str] = frozenset()


_current: ContextVar[Caller | None] = ContextVar("isp_gateway_caller", default=None)


def current_caller() -> Caller | None:
    """The caller of the request being served, or None outside a request (background work)."""
    return _current.get()


def set_current_caller(caller: Caller) -> None:
    _current.set(caller)
