"""The service's error tree.

Services raise these; one handler (envelope.py) renders them. Nothing below the routers
knows about HTTP, except for the status each error class carries as data.
"""

from __future__ import annotations

from typing import Any, Literal

from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action


class ServiceError(Exception):
    """A business outcome that ends the request with an error envelope.

    Its message is the catalogue's text (kit/messages.py) of its action and `variant`, with
    `params` filled in, in the language of the request being served; `message` is for a
    text the catalogue cannot hold (a validator's own words)."""

    status_code = 500
    action: str = Action.ERROR
    type: Literal["success", "error", "info"] = "error"
    # The catalogue's variant of the action that is the message unless another is given.
    variant: str = ""

    def __init__(
        self,
        message: str | None = None,
        *,
        action: str | None = None,
        variant: str | None = None,
        params: dict[str, Any] | None = None,
        status_code: int | None = None,
        data: Any = None,
        meta: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        if action is not None:
            self.action = action
        if variant is not None:
            self.variant = variant
        self.message = message or messages.say(self.action, self.variant, **(params or {}))
        super().__init__(self.message)
        if status_code is not None:
            self.status_code = status_code
        self.data = data
        self.meta = meta
        self.headers = headers or {}


class InvalidInput(ServiceError):
    status_code = 400


class NotFound(ServiceError):
    status_code = 404


class Conflict(ServiceError):
    status_code = 409


class Locked(ServiceError):
    """Too many attempts; carries a Retry-After."""

    status_code = 429

    def __init__(self, message: str | None = None, *, retry_after: int, **kw: Any) -> None:
        headers = {"Retry-After": str(max(1, int(retry_after)))}
        super().__init__(message, headers=headers, **kw)
        self.retry_after = retry_after


class UpstreamError(ServiceError):
    """The upstream could not give a usable answer. The base of what the gateway raises."""

    status_code = 502
    action = Action.UPSTREAM_UNAVAILABLE
    variant = "rest"


class UpstreamUnavailable(UpstreamError):
    """Down, timed out, 5xx, or an answer that is not the JSON we expect."""


class UpstreamUnauthorized(UpstreamError):
    """The upstream rejected our key (401/403)."""

    action = Action.UPSTREAM_UNAUTHORIZED
    variant = "rest"


class UpstreamRateLimited(UpstreamError):
    status_code = 503
    action = Action.UPSTREAM_RATE_LIMITED

    def __init__(self, retry_after: float, message: str | None = None) -> None:
        super().__init__(message, headers={"Retry-After": str(max(1, round(retry_after)))})
        self.retry_after = retry_after


class UpstreamRejected(UpstreamError):
    """The upstream answered 4xx to a request (validation errors, unknown resource)."""

    def __init__(self, status: int, body: Any, message: str | None = None) -> None:
        super().__init__(message, variant="rejected", params={"status": status})
        self.upstream_status = status
        self.body = body


class Loading(ServiceError):
    """A list the answer needs is still being loaded for the first time (start-up), and the
    load will not end within the request's deadline: retry after `Retry-After` (issue 28).
    Never a 502: the backend answers, it only takes a while to read it all."""

    status_code = 503
    action = Action.LOADING

    def __init__(self, what: str, read: int, total: int, retry_after: int) -> None:
        # `what`: the list, the catalogue's variant of `loading` ("clients").
        super().__init__(
            variant=what,
            params={"read": read, "total": total, "retry_after": retry_after},
            headers={"Retry-After": str(retry_after)},
            meta={"read": read, "total": total},
        )
        self.retry_after = retry_after


class StoreUnavailable(ServiceError):
    """The shared store (Redis) does not answer. Locks, throttles and caps live there, so a
    request that needs it is refused rather than served without those guards."""

    status_code = 503
    action = Action.STORE_UNAVAILABLE
    variant = "store"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message, headers={"Retry-After": "5"})
