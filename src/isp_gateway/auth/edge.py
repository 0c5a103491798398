"""Credentials at the edge (web/edge.py): a refused credential or scope answered before
routing, for no more server time than a cached lookup (CALLERS.md 6 "The cost of refusing").

The regular dependency (dependencies.py) stays the rule; this door gives its answer early
only where it is sure to be the same: on a route whose first dependency is the caller's
check (`Scoped(...)` or `CurrentCaller`, solved before anything else that could answer),
for a missing or refused credential (the 401, counted `unauthorized`) and a key without the
route's scope (the 403 `insufficient_scope`, counted `scope_denied`, after the key's own
rate as the regular check counts it). Everything else, a credential that passes included,
goes on to the route.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from fastapi.routing import RouteContext

from isp_gateway.auth.credentials import (
    CREDENTIALS_ERROR,
    Gatekeeper,
    bearer,
    refused_credential,
    valid_end_user,
)
from isp_gateway.auth.dependencies import current_caller, scoped_caller
from isp_gateway.auth.keys import KEY_PREFIX, ApiKey, enforce_key_rate
from isp_gateway.auth.scopes import InsufficientScope
from isp_gateway.auth.tokens import InvalidToken, shaped, verify_token
from isp_gateway.kit.callers import Caller
from isp_gateway.kit.errors import Locked, StoreUnavailable
from isp_gateway.web.doors import EdgeAnswer, EdgeRequest, EdgeRoute, speak

# The regular route's 401 byte for byte (FastAPI's HTTPException, as envelope.py answers it).
REFUSED_BODY = b'{"detail":"' + CREDENTIALS_ERROR.encode() + b'"}'
_CHALLENGE = ((b"www-authenticate", b"Bearer"),)


class Refused:
    """No valid credential (counted once, when found)."""


REFUSED = Refused()
# How many callers the scope denials keep made.
_KEPT_CALLERS = 1024
# A current key, a verified JWT's subject (a str: a JWT holds every scope), or refused.
Credential = ApiKey | str | Refused


def credential(runtime: Gatekeeper, request: EdgeRequest) -> Credential:
    """The request's credential as the regular check reads it (a key first, then a JWT),
    worked out once a request and kept on it for the next door. A refused one is counted
    (`refused_credential`) the once."""
    found = request.credential
    if found is not None:
        return found  # type: ignore[return-value]
    key = request.api_key
    token = None
    if key is None:
        token = bearer(request.authorization)
        if token is not None and token.startswith(KEY_PREFIX):
            key, token = token, None
    result: Credential = REFUSED
    if key is not None:
        result = runtime.key_ring.lookup(key) or REFUSED
    elif token:
        subject = runtime.token_cache.get(token)
        if subject is None and shaped(token):  # else refused with no exception raised
            try:
                subject = verify_token(runtime.settings, token, runtime.token_cache)
            except InvalidToken:
                subject = None
        if subject is not None:
            result = subject
    if result is REFUSED:
        request.name()  # the audit's event carries the request's id
        refused_credential(runtime, request.address)
    request.credential = result
    return result


@functools.cache
def refusal(template: str, logged: str | None = None) -> EdgeAnswer:
    """The 401 of a route (one a route template, made once); `logged`, the path as the
    access log writes it when the door knows it (a lookup's, masked without a regex)."""
    return EdgeAnswer(401, REFUSED_BODY, template, _CHALLENGE, logged=logged)


def _caller_first(context: RouteContext) -> tuple[bool, tuple[str, ...]]:
    """Whether the route's first dependency is the caller's check, and the scopes it asks."""
    dependant = getattr(context, "dependant", None)
    if dependant is None or not dependant.dependencies:
        return False, ()
    first = dependant.dependencies[0]
    if first.call is current_caller:
        return True, ()
    if first.call is scoped_caller:
        return True, tuple(first.own_oauth_scopes or ())
    return False, ()


class Denials:
    """A key without a route's scope, refused at the edge: the 403 `insufficient_scope` as
    the regular check gives it, counted `scope_denied` after the key's own rate as the
    regular check counts it (dependencies.scoped_caller). The caller's door gives it on
    every route it checks, the lookup door on the lookups (it has the key in hand there,
    and the route it reaches is sure), so a lookup's 403 costs one credential and no
    route search."""

    def __init__(self) -> None:
        # Each 403 made once: one a route template, scope and logged path (the language
        # is the app's).
        self._made: dict[tuple[str, str, str | None], EdgeAnswer] = {}
        # What the audit is given of each refusal, made once each (the audit builds its
        # event from them for a group's first refusal of the minute only): the caller, one
        # a key, end user and address (bounded: those are the caller's to vary), and the
        # details, one a scope, method and route.
        self._callers: dict[tuple[str, str, str, frozenset[str]], Caller] = {}
        self._details: dict[tuple[str, str, str], dict[str, str]] = {}

    async def deny(
        self,
        runtime: Gatekeeper,
        request: EdgeRequest,
        key: ApiKey,
        scopes: tuple[str, ...],
        template: str,
        logged: str | None = None,
    ) -> EdgeAnswer | None:
        """The 403 of the first of `scopes` the key lacks, or None to let the request go on
        (the key holds them all, or the route answers first: an invalid end user's 422, a
        key over its rate or a store away)."""
        missing = None
        for scope in scopes:
            if not key.allows(scope):
                missing = scope
                break
        end_user = request.end_user
        if missing is None or (end_user is not None and not valid_end_user(end_user)):
            return None  # the route serves it, or answers the end user's 422
        if key.rate_per_minute is not None:
            try:
                await enforce_key_rate(runtime.store, key)
            except (Locked, StoreUnavailable):
                return None  # the regular check counts it again and answers 429 (or 503)
        request.name()  # the audit's event carries the request's id
        who = (key.name, end_user or key.name, request.address, key.scopes)
        caller = self._callers.get(who)
        if caller is None:
            if len(self._callers) >= _KEPT_CALLERS:
                self._callers.clear()
            caller = self._callers[who] = Caller(*who)
        what = (missing, request.method, template)
        details = self._details.get(what)
        if details is None:
            details = self._details[what] = {
                "required": missing,
                "method": what[1],
                "route": template,
            }
        # Counted as the regular check counts it (dependencies.scoped_caller).
        runtime.audit.count("scope_denied", "denied", kind=missing, details=details, caller=caller)
        made = self._made.get((template, missing, logged))
        if made is None:
            speak(request)
            made = EdgeAnswer.of_error(InsufficientScope(missing), template)
            made.logged = logged
            self._made[(template, missing, logged)] = made
        return made


class CallerDoor:
    """The edge's door for the caller's check: 401 and 403 as the regular route gives
    them (see the module)."""

    def __init__(self, runtime_getter: Callable[[], Gatekeeper], denials: Denials) -> None:
        self.runtime_getter = runtime_getter
        self.denials = denials
        # Each route's answer to "is the caller checked first, for which scopes".
        self._routes: dict[EdgeRoute, tuple[bool, tuple[str, ...]]] = {}

    def _requirement(self, route: EdgeRoute) -> tuple[bool, tuple[str, ...]]:
        found = self._routes.get(route)
        if found is None:
            found = self._routes[route] = _caller_first(route.context)
        return found

    async def answer(self, request: EdgeRequest, route: EdgeRoute | None) -> EdgeAnswer | None:
        if route is None:
            return None
        checked, scopes = self._requirement(route)
        if not checked:
            return None
        runtime = self.runtime_getter()
        found = credential(runtime, request)
        if isinstance(found, Refused):
            return refusal(route.template)
        if isinstance(found, str):
            return None
        return await self.denials.deny(runtime, request, found, scopes, route.template)
