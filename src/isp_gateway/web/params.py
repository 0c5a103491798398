"""Request parameters several features share (a service id in a path, a long-poll wait, an
idempotency key), the errors of a route about one service, and REST's verification guard
(CALLERS.md 5). No feature owns them, so no feature imports another feature's router or
schemas for them."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Path, Query, Request

from isp_gateway.kit.actions import Action
from isp_gateway.kit.callers import current_caller
from isp_gateway.kit.errors import InvalidInput
from isp_gateway.kit.verifications import VerificationRequired
from isp_gateway.web.envelope import Responses, error_responses

MAX_SERVICE_ID_DIGITS = 10
# The longest long-poll wait of a ping or a diagnose, in seconds.
MAX_WAIT_SECONDS = 25.0

# A positive integer of 1 to 10 digits (all zeros is no id).
SERVICE_ID_PATTERN = r"^[\t-\r ]*(?!0+[\t-\r ]*$)[0-9]{1,10}[\t-\r ]*$"


def parse_service_id(raw: str) -> int:
    """A service id from a path: a positive integer of ASCII digits only (no sign, no
    decimals, no exponent), at most 10 of them (CALLERS.md 2: the documented pattern; no
    upstream id is longer); else 400 `invalid_service_id`, on every service-id route."""
    text = raw.strip()
    if (
        not text.isdigit()
        or not text.isascii()
        or len(text) > MAX_SERVICE_ID_DIGITS
        or int(text) == 0
    ):
        raise InvalidInput(action=Action.INVALID_SERVICE_ID)
    return int(text)


# A service id in a path, read by `parse_service_id` (400 `invalid_service_id` otherwise):
# the route takes the text, so junk is the spec's 400, not FastAPI's 422; the document says
# what a valid one is, an integer (issue 28.12), so a generated client takes an int.
ServiceIdPath = Annotated[
    str,
    Path(
        description="A positive integer, 1 to 10 digits (anything else: 400 `invalid_service_id`)",
        json_schema_extra={
            "type": "integer",
            "minimum": 1,
            "maximum": 10**MAX_SERVICE_ID_DIGITS - 1,
        },
    ),
]


def service_route_errors(upstream_actions: list[str]) -> Responses:
    """The errors of a route about one service: a bad or unknown id, the store, and the
    upstream's failures (`upstream_actions`, the 502's)."""
    return error_responses(
        400,
        404,
        502,
        503,
        actions={
            400: Action.INVALID_SERVICE_ID,
            404: Action.CLIENT_NOT_FOUND,
            502: upstream_actions,
        },
    )


# The errors of a route about one service (account, tickets, diagnose): a bad or unknown id,
# and the upstream's (our key refused on the client read is spec 5.2's CLIENT_NOT_FOUND).
SERVICE_ROUTE_ERRORS = service_route_errors(
    [
        Action.UPSTREAM_UNAVAILABLE,
        Action.UPSTREAM_UNAUTHORIZED,
        Action.UPSTREAM_REFUSED_CLIENT_FETCH,
    ]
)

WaitQuery = Annotated[
    float,
    Query(
        ge=0,
        le=MAX_WAIT_SECONDS,
        description="Hold the answer up to this many seconds until the result is final.",
    ),
]

# A write that can be retried (a ticket, a payment promise or report) takes one.
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        max_length=255,
        description="A repeat with the same key within 24 h returns the first answer",
    ),
]


# -- REST's verification guard (CALLERS.md 5, opt-in with REQUIRE_VERIFICATION) ----------

VERIFICATION_HEADER = "X-Verification-Id"
# The refusal names the endpoint and the header (kit/messages.py).
REST_VARIANT = "rest"

# The 403 of a guarded route, beside the route's other errors.
VERIFICATION_ERRORS: Responses = error_responses(403, actions={403: Action.VERIFICATION_REQUIRED})
VERIFICATION_ERRORS[403]["description"] = (
    "With REQUIRE_VERIFICATION: no `X-Verification-Id`, or one that is unknown, expired, "
    "of another service or of another caller or end user. `action`: `verification_required`."
)
SERVICE_ROUTE_ERRORS_VERIFIED: Responses = {**SERVICE_ROUTE_ERRORS, **VERIFICATION_ERRORS}
# The 403 of a route that always needs a verification (require_verified).
ALWAYS_VERIFIED_ERRORS: Responses = error_responses(
    403, actions={403: Action.VERIFICATION_REQUIRED}
)
ALWAYS_VERIFIED_ERRORS[403]["description"] = (
    "Always, whatever REQUIRE_VERIFICATION: no `X-Verification-Id`, or one that is unknown, "
    "expired, of another service or of another caller or end user. `action`: "
    "`verification_required`."
)


async def require_verification(request: Request, service_id: int) -> None:
    """With REQUIRE_VERIFICATION, refuse (403 `verification_required`, counted in the audit)
    unless the request's X-Verification-Id names a verification of `service_id` by this
    caller and end user; without it, nothing. Unknown, expired, malformed, another
    service's and another person's ids are refused alike.

    For a route whose service id is in the body (ticket creation):
    `await require_verification(request, body.service_id)`."""
    if not request.app.state.runtime.settings.REQUIRE_VERIFICATION:
        return
    await require_verified(request, service_id)


async def require_verified(request: Request, service_id: int) -> None:
    """The check of `require_verification`, whatever REQUIRE_VERIFICATION says: for the
    routes that never act for a customer nobody verified (the money routes, MONEY.md)."""
    # Read from the app, not imported: services import this module for parse_service_id,
    # and the runtime sits above them (import-linter's layers).
    runtime = request.app.state.runtime
    caller = current_caller()
    try:
        if caller is None:
            raise VerificationRequired(variant=REST_VARIANT)
        header = request.headers.get(VERIFICATION_HEADER)
        try:
            verified = await runtime.services.verifications.service_of(header, caller)
        except VerificationRequired:
            raise VerificationRequired(variant=REST_VARIANT) from None
        if verified != service_id:
            raise VerificationRequired(variant=REST_VARIANT)
    except VerificationRequired:
        # Counted (CALLERS.md 6): one event per caller and minute, the first one's service.
        runtime.audit.count(Action.VERIFICATION_REQUIRED, "refused", service_id=service_id)
        raise


# Declared so that every guarded operation documents the header; read by
# require_verification from the request.
VerificationIdHeader = Annotated[
    str | None,
    Header(
        alias=VERIFICATION_HEADER,
        description="The verification_id of a successful verify of this service by this "
        "caller and end user; required when the gateway runs with REQUIRE_VERIFICATION",
    ),
]


async def _verified_service(request: Request, verification_id: VerificationIdHeader = None) -> None:
    """The guard of a route with `{service_id}` in its path (the id is parsed first: a bad
    one stays 400 `invalid_service_id`)."""
    await require_verification(request, parse_service_id(str(request.path_params["service_id"])))


# `dependencies=[VERIFIED]` on a route about one service in its path.
VERIFIED = Depends(_verified_service)


AlwaysVerificationIdHeader = Annotated[
    str | None,
    Header(
        alias=VERIFICATION_HEADER,
        description="The verification_id of a successful verify of this service by this "
        "caller and end user; always required here, whatever REQUIRE_VERIFICATION",
    ),
]


async def _always_verified_service(
    request: Request, verification_id: AlwaysVerificationIdHeader = None
) -> None:
    """The guard of a money route (MONEY.md): `require_verified`, the id parsed first."""
    await require_verified(request, parse_service_id(str(request.path_params["service_id"])))


# `dependencies=[ALWAYS_VERIFIED]` on a route that never acts for an unverified customer.
ALWAYS_VERIFIED = Depends(_always_verified_service)
