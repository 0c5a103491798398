"""BackendResponse (spec 2.1) and the handlers that render every error as one.

Auth errors are the exception: they keep FastAPI's `{"detail": ...}` shape (spec 5.1, 7).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

# Re-exported: routers build their success envelopes from the edge's one module.
from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.kit.answers import Answer
from isp_gateway.kit.answers import envelope as envelope
from isp_gateway.kit.answers import failure as failure
from isp_gateway.kit.answers import success as success
from isp_gateway.kit.errors import ServiceError
from isp_gateway.web.methods import allowed_methods

log = logging.getLogger("isp_gateway")

T = TypeVar("T")


class BackendResponse(BaseModel, Generic[T]):
    ok: bool
    type: Literal["success", "error", "info"]
    action: str | None = None
    data: T | None = None
    message: str | None = None
    meta: dict[str, Any] | None = None


class ErrorResponse(BaseModel):
    """The envelope of every answer that is not a success (`ok` false); `action` says which."""

    ok: Literal[False]
    type: Literal["error", "info"]
    action: str
    data: Any = None
    message: str | None
    meta: dict[str, Any] | None = None


class AuthError(BaseModel):
    """The OAuth2-style answer of the token endpoint and of a missing or bad token (spec 7)."""

    detail: str


# -- documenting error answers (OpenAPI `responses=`) ---------------------------------------

Responses = dict[int | str, dict[str, Any]]

PAYLOAD_TOO_LARGE = Action.PAYLOAD_TOO_LARGE
_RETRY_AFTER = {"description": "Seconds to wait before trying again", "schema": {"type": "integer"}}
_ALLOW = {"description": "The methods this path supports", "schema": {"type": "string"}}


@dataclass(frozen=True)
class _Status:
    title: str
    actions: tuple[str, ...] = ()
    headers: tuple[tuple[str, dict[str, Any]], ...] = ()


# What each status means in this API and the `action` values it carries unless a route says
# otherwise. 429 `rate_limited` is the service's own limit (off by default): any /api/v1 route.
STATUSES: dict[int, _Status] = {
    400: _Status("The request is well formed but its values are not acceptable"),
    404: _Status("Not found"),
    405: _Status("Method not allowed for this path", (Action.ERROR,), (("Allow", _ALLOW),)),
    409: _Status("Conflict with the current state"),
    413: _Status("Request body too large (MAX_BODY_BYTES)", (PAYLOAD_TOO_LARGE,)),
    422: _Status(
        "Malformed request: `meta.errors` lists `{field, message}`", (Action.VALIDATION_ERROR,)
    ),
    429: _Status("Too many requests", (), (("Retry-After", _RETRY_AFTER),)),
    500: _Status("The service failed", (Action.ERROR,)),
    502: _Status(
        "The ISP backend is down, timed out, answered an error, or refused the service's key",
        (Action.UPSTREAM_UNAVAILABLE, Action.UPSTREAM_UNAUTHORIZED),
    ),
    503: _Status(
        "The ISP backend is rate limiting the service (`upstream_rate_limited`), or a list the "
        "answer needs is still loading at start-up (`loading`); retry after `Retry-After`",
        (Action.UPSTREAM_RATE_LIMITED,),
        (("Retry-After", _RETRY_AFTER),),
    ),
}
# Appended to whatever a route lists for the status.
ALWAYS: dict[int, tuple[str, ...]] = {429: (Action.RATE_LIMITED,)}


def error_response_doc(
    status: int, actions: Sequence[str] | None = None, model: type[BaseModel] = ErrorResponse
) -> dict[str, Any]:
    """One documented error answer: the envelope model, the `action` values (listed in the
    description and pinned as an enum in the schema) and the headers the status carries."""
    known = STATUSES.get(status, _Status("Error"))
    values = list(dict.fromkeys([*(actions or known.actions), *ALWAYS.get(status, ())]))
    listed = ", ".join(f"`{a}`" for a in values)
    doc: dict[str, Any] = {
        "model": model,
        "description": f"{known.title}. `action`: {listed}." if values else known.title,
    }
    if values:
        enum = {"properties": {"action": {"enum": values}}}
        doc["content"] = {"application/json": {"schema": enum}}
    if known.headers:
        doc["headers"] = {name: dict(spec) for name, spec in known.headers}
    return doc


def error_responses(
    *statuses: int,
    actions: Mapping[int, str | Sequence[str]] | None = None,
    models: Mapping[int, type[BaseModel]] | None = None,
) -> Responses:
    """`responses=` for a route: every error status it can answer, each in the envelope.

        @router.get("/x/{id}", responses=error_responses(404, 502, 503,
                                                          actions={404: "x_not_found"}))

    `actions` replaces a status's default action list (STATUSES) for this route; `models`
    gives a status a more precise envelope (e.g. `BackendResponse[ZoneLimitData]` for 409).
    401, 405, 413, 422 and the service's 429 are added to every route where they apply by
    `isp_gateway.openapi`; list them here only to give them other actions."""
    chosen = actions or {}
    out: Responses = {}
    for status in statuses:
        given = chosen.get(status)
        values = [given] if isinstance(given, str) else given
        out[status] = error_response_doc(status, values, (models or {}).get(status, ErrorResponse))
    return out


class View(Protocol):
    """An answer a service decided whole (a ping poll, a diagnosis), rendered as is."""

    @property
    def ok(self) -> bool: ...
    @property
    def type(self) -> Literal["success", "error", "info"]: ...
    @property
    def action(self) -> str: ...
    @property
    def data(self) -> Any: ...
    @property
    def message(self) -> str: ...


def view_envelope(view: View, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    return envelope(
        ok=view.ok,
        type=view.type,
        action=view.action,
        data=view.data,
        message=view.message,
        meta=meta,
    )


# The JSON options of every body the service answers (Starlette's JSONResponse's): compact,
# UTF-8 as is, no NaN. One encoder, built once (json.dumps with options builds one per call).
_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode


def encode(body: Any, *, data_json: bytes | None = None) -> bytes:
    """The bytes of a JSON body, the same whichever layer answers it: the handlers (through
    `EnvelopeResponse`), the middleware's own answers, the pre-serialised lists and the
    lookup edge's prebuilt hits. `data_json` is an envelope's `data` already encoded (a
    cached list of clients), put in as is between the members before and after it."""
    if data_json is None:
        return _encode(body).encode()
    keys = list(body)
    at = keys.index("data")
    head = _encode({key: body[key] for key in keys[:at]})[:-1]  # "{" and the members before
    tail = _encode({key: body[key] for key in keys[at + 1 :]})[1:]  # the members after, "}"
    return b"".join(
        (
            (head + ('"data":' if head == "{" else ',"data":')).encode(),
            data_json,
            (tail if tail == "}" else "," + tail).encode(),
        )
    )


class EnvelopeResponse(JSONResponse):
    """A JSON answer whose bytes come from `encode`."""

    def render(self, content: Any) -> bytes:
        return encode(content)


def render(answer: Answer) -> JSONResponse:
    """A decided answer (kit/answers.py) as the HTTP response."""
    return EnvelopeResponse(answer.body, status_code=answer.status_code, headers=answer.headers)


def respond(
    status_code: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> JSONResponse:
    return EnvelopeResponse(body, status_code=status_code, headers=headers)


def error_response(
    status_code: int,
    action: str,
    message: str,
    *,
    data: Any = None,
    meta: dict[str, Any] | None = None,
    type_: Literal["success", "error", "info"] = "error",
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    body = failure(action, message, data=data, meta=meta, type=type_)
    return EnvelopeResponse(body, status_code=status_code, headers=headers)


# A field's detail in `meta.errors` (the validator's words, in English in both languages).
MALFORMED_JSON = "Malformed JSON body"
_FASTAPI_BODY_ERROR = "There was an error parsing the body"


def _field_path(loc: tuple[Any, ...] | list[Any]) -> str:
    return ".".join(str(part) for part in loc)


async def handle_service_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ServiceError)
    if request.url.path.startswith("/api/v1/auth"):
        # The token endpoint is outside the envelope (spec 4.2), e.g. its 503 while the
        # store that holds the login throttle is away.
        return JSONResponse(
            {"detail": exc.message}, status_code=exc.status_code, headers=exc.headers
        )
    return error_response(
        exc.status_code,
        exc.action,
        exc.message,
        data=exc.data,
        meta=exc.meta,
        type_=exc.type,
        headers=exc.headers,
    )


async def handle_validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    if request.url.path.startswith("/api/v1/auth"):
        # The token endpoint is outside the envelope (spec 4.2): answer OAuth2-style.
        return JSONResponse(
            {
                "detail": "username and password are required as form fields "
                "(application/x-www-form-urlencoded)."
            },
            status_code=422,
        )
    errors = []
    for err in exc.errors():
        msg = str(err.get("msg", "invalid value"))
        if err.get("type") == "json_invalid":
            msg = MALFORMED_JSON
        errors.append({"field": _field_path(err.get("loc", ())), "message": msg})
    return error_response(
        422, Action.VALIDATION_ERROR, invalid_request(errors), meta={"errors": errors}
    )


def invalid_request(errors: list[dict[str, str]]) -> str:
    """The message of a 422: the first field and its detail, and how many more."""
    first = errors[0] if errors else {"field": "request", "message": "invalid"}
    say = messages.say
    message = say(Action.VALIDATION_ERROR, "fields", field=first["field"], detail=first["message"])
    if len(errors) > 1:
        message += say(Action.VALIDATION_ERROR, "more", count=len(errors) - 1)
    return message


async def handle_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    # Auth failures keep the {"detail": ...} shape the spec prescribes.
    is_auth_throttle = exc.status_code == 429 and request.url.path.startswith("/api/v1/auth")
    if exc.status_code == 401 or is_auth_throttle:
        return JSONResponse(
            {"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers
        )
    if exc.status_code == 400 and exc.detail == _FASTAPI_BODY_ERROR:
        # A body FastAPI could not even decode (not UTF-8): malformed JSON, 422 like the rest.
        error = {"field": "body", "message": MALFORMED_JSON}
        return error_response(
            422, Action.VALIDATION_ERROR, invalid_request([error]), meta={"errors": [error]}
        )
    action: str = Action.ERROR
    headers = dict(exc.headers or {})
    if exc.status_code == 404:
        message = messages.say(Action.ERROR, "not_found")
    elif exc.status_code == 405:
        message = messages.say(Action.ERROR, "method")
        # Every method of the path, not only those of the first route Starlette tried.
        routes = request.app.state.route_table
        headers["Allow"] = ", ".join(allowed_methods(routes, request.scope))
    else:
        message = str(exc.detail) if exc.detail else messages.say(Action.ERROR, "request")
        if exc.status_code == 413:
            action = PAYLOAD_TOO_LARGE
    return error_response(exc.status_code, action, message, headers=headers)


async def handle_unexpected(request: Request, exc: Exception) -> JSONResponse:
    # Log the traceback server-side only; the client gets a generic envelope.
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(500, Action.ERROR, messages.say(Action.ERROR, "internal"))


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ServiceError, handle_service_error)
    app.add_exception_handler(RequestValidationError, handle_validation_error)
    app.add_exception_handler(StarletteHTTPException, handle_http_error)
    app.add_exception_handler(Exception, handle_unexpected)
