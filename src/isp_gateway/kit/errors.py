"""The service's error tree.

Services raise these; one handler (envelope.py) renders them. Nothing below the routers
knows about HTTP, except for the status each error class carries as data.
"""

from __future__ import annotations

from typing import Any, Literal

from isp_gateway.kit.actions import Action


class ServiceError(Exception):
    """A business outcome that ends the request with an error envelope."""

    status_code = 500
    action: str = Action.ERROR
    type: Literal["success", "error", "info"] = "error"
    default_message = "Internal error"

    def __init__(
        self,
        message: str | None = None,
        *,
        action: str | None = None,
        status_code: int | None = None,
        data: Any = None,
        meta: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.message = message or self.default_message
        super().__init__(self.message)
        if action is not None:
            self.action = action
        if status_code is not None:
            self.status_code = status_code
        self.data = data
        self.meta = meta
        self.headers = headers or {}


class InvalidInput(ServiceError):
    status_code = 400
    default_message = "Invalid input"


class NotFound(ServiceError):
    status_code = 404
    default_message = "Not found"


class Conflict(ServiceError):
    status_code = 409
    default_message = "Conflict"


class Locked(ServiceError):
    """Too many attempts; carries a Retry-After."""

    status_code = 429
    default_message = "Too many attempts, try again later"

    def __init__(self, message: str | None = None, *, retry_after: int, **kw: Any) -> None:
        headers = {"Retry-After": str(max(1, int(retry_after)))}
        super().__init__(message, headers=headers, **kw)
        self.retry_after = retry_after


class UpstreamError(ServiceError):
    """The upstream could not give a usable answer. The base of what the gateway raises."""

    status_code = 502
    action = Action.UPSTREAM_UNAVAILABLE
    default_message = "The ISP backend is not available right now, try again shortly"


class UpstreamUnavailable(UpstreamError):
    """Down, timed out, 5xx, or an answer that is not the JSON we expect."""


class UpstreamUnauthorized(UpstreamError):
    """The upstream rejected our key (401/403)."""

    action = Action.UPSTREAM_UNAUTHORIZED
    default_message = "The ISP backend refused the service's credentials"


class UpstreamRateLimited(UpstreamError):
    status_code = 503
    action = Action.UPSTREAM_RATE_LIMITED
    default_message = "The ISP backend is rate limiting requests, try again shortly"

    def __init__(self, retry_after: float, message: str | None = None) -> None:
        super().__init__(message, headers={"Retry-After": str(max(1, round(retry_after)))})
        self.retry_after = retry_after


class UpstreamRejected(UpstreamError):
    """The upstream answered 4xx to a request (validation errors, unknown resource)."""

    def __init__(self, status: int, body: Any, message: str | None = None) -> None:
        super().__init__(message or f"The ISP backend refused the request ({status})")
        self.upstream_status = status
        self.body = body


class Loading(ServiceError):
    """A list the answer needs is still being loaded for the first time (start-up), and the
    load will not end within the request's deadline: retry after `Retry-After` (issue 28).
    Never a 502: the backend answers, it only takes a while to read it all."""

    status_code = 503
    action = Action.LOADING
    default_message = "The service is still loading data it needs, try again shortly"

    def __init__(self, what: str, read: int, total: int, retry_after: int) -> None:
        super().__init__(
            f"The {what} is still loading from the ISP backend ({read} of {total}); try again "
            f"in {retry_after} s",
            headers={"Retry-After": str(retry_after)},
            meta={"read": read, "total": total},
        )
        self.retry_after = retry_after


class StoreUnavailable(ServiceError):
    """The shared store (Redis) does not answer. Locks, throttles and caps live there, so a
    request that needs it is refused rather than served without those guards."""

    status_code = 503
    action = Action.STORE_UNAVAILABLE
    default_message = "The service's shared store is not available right now, try again shortly"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message, headers={"Retry-After": "5"})
