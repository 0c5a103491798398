"""What every test process would otherwise build again and again, built once: an app's
OpenAPI document, and the default TLS context of an httpx client."""

from __future__ import annotations

import os
import pickle
import ssl
from typing import Any

import fastapi.applications
import httpx
import httpx._transports.default
from fastapi.routing import APIRoute, iter_route_contexts

# -- the OpenAPI document of an app, built once a process -----------------------------------

# create_app builds the app's OpenAPI document (app.py says why), about 0.3 s of the 0.35 s
# a gateway takes to start, and the suite starts over 600. FastAPI's get_openapi is a pure
# function of its arguments: the app's title, tags and the like, and its routes, down to
# each route's endpoint and the callables of its dependencies (which hold whatever a route
# could take from the settings). The test processes build it once for each distinct set of
# arguments and hand every app its own copy (the project completes it in place).


class _Same:
    """A key part equal only to the very same object (which it keeps alive)."""

    __slots__ = ("thing",)

    def __init__(self, thing: Any) -> None:
        self.thing = thing

    def __hash__(self) -> int:
        return id(self.thing)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and self.thing is other.thing


def _route_key(route: Any) -> Any:
    """What get_openapi reads of a route (a RouteContext of an APIRoute)."""
    if not route.include_in_schema:
        return ("hidden", route.path)

    def calls(dependant: Any) -> tuple[Any, ...]:
        nested = tuple(calls(sub) for sub in dependant.dependencies)
        scopes = (dependant.own_oauth_scopes, dependant.parent_oauth_scopes)
        return (_Same(dependant.call), repr(scopes), nested)

    return (
        route.path,
        route.path_format,
        tuple(sorted(route.methods or ())),
        _Same(route.endpoint),
        calls(route.dependant),
        route.name,
        route.unique_id,
        route.summary,
        route.description,
        route.response_description,
        route.deprecated,
        route.operation_id,
        repr(route.tags),
        route.status_code,
        repr(route.response_class),
        repr(route.response_model),
        repr(route.responses),
        repr(route.openapi_extra),
        _routes_key(route.callbacks or ()),
    )


def _routes_key(routes: Any) -> tuple[Any, ...]:
    # As get_openapi walks them: the routes of the routers an app includes, each with what
    # the include adds (a prefix, dependencies, tags); only API routes are documented.
    return tuple(
        _route_key(context)
        for context in iter_route_contexts(routes)
        if isinstance(context.original_route, APIRoute)
    )


def _openapi_key(kwargs: dict[str, Any]) -> Any:
    routes = _routes_key(kwargs["routes"])
    webhooks = _routes_key(kwargs.get("webhooks") or ())
    rest = sorted((k, repr(v)) for k, v in kwargs.items() if k not in ("routes", "webhooks"))
    return (routes, webhooks, tuple(rest))


def memoize_openapi() -> None:
    """Make FastAPI build an OpenAPI document once a test process for the same arguments
    (see above); every call still gets a document of its own."""
    build = fastapi.applications.get_openapi
    if getattr(build, "memoized", False):
        return
    documents: dict[Any, dict[str, Any]] = {}

    def get_openapi(**kwargs: Any) -> dict[str, Any]:
        key = _openapi_key(kwargs)
        try:
            hash(key)
        except TypeError:  # a dependency that cannot be a key: built each time
            return build(**kwargs)
        if os.environ.get("TEST_OPENAPI_VERIFY") and key in documents:
            # TEST_OPENAPI_VERIFY=1: every reuse checked against a fresh build (the suite
            # passed so, 2026-11).
            assert build(**kwargs) == documents[key], "memo mismatch"
        if key not in documents:
            documents[key] = build(**kwargs)
        # A deep copy (of our own document), five times faster than copy.deepcopy.
        return pickle.loads(pickle.dumps(documents[key]))  # noqa: S301

    get_openapi.memoized = True  # type: ignore[attr-defined]
    fastapi.applications.get_openapi = get_openapi  # type: ignore[assignment]


# -- one default TLS context a process ---------------------------------------------------

# Every httpx client builds its TLS context, loading the CA bundle (certifi's), whether or
# not it ever speaks TLS: 20 to 90 ms each, and a started gateway makes three (its upstream
# and notice clients, the test's). The test processes give every client that asks for the
# default context one shared default context (as httpx recommends an application does:
# `verify=ctx`); a client given its own (a test's CA, verify=False) still builds it.


def share_default_ssl_context() -> None:
    build = httpx._transports.default.create_ssl_context
    if getattr(build, "shared", False):
        return
    shared: dict[tuple[str | None, str | None], ssl.SSLContext] = {}

    def create_ssl_context(
        verify: Any = True, cert: Any = None, trust_env: bool = True
    ) -> ssl.SSLContext:
        if verify is not True or cert is not None or not trust_env:
            return build(verify=verify, cert=cert, trust_env=trust_env)
        # The default: certifi's bundle, else the one SSL_CERT_FILE or SSL_CERT_DIR names.
        where = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        if where not in shared:
            shared[where] = build()
        return shared[where]

    create_ssl_context.shared = True  # type: ignore[attr-defined]
    httpx._transports.default.create_ssl_context = create_ssl_context  # type: ignore[assignment]
