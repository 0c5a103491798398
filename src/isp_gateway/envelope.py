"""BackendResponse (spec 2.1) and the handlers that render every error as one.

Auth errors are the exception: they keep FastAPI's `{"detail": ...}` shape (spec 5.1, 7).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Generic, Literal, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from isp_gateway.errors import ServiceError

log = logging.getLogger("isp_gateway")

T = TypeVar("T")


class BackendResponse(BaseModel, Generic[T]):
    ok: bool
    type: Literal["success", "error", "info"]
    action: str | None = None
    data: T | None = None
    message: str | None = None
    meta: dict[str, Any] | None = None


def envelope(
    *,
    ok: bool = True,
    type: Literal["success", "error", "info"] = "success",
    action: str | None = None,
    data: Any = None,
    message: str | None = None,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "ok": ok,
        "type": type,
        "action": action,
        "data": data,
        "message": message,
        "meta": meta,
    }


def success(
    action: str | None,
    data: Any = None,
    *,
    message: str | None = None,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return envelope(action=action, data=data, message=message, meta=meta)


def respond(
    status_code: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(body, status_code=status_code, headers=headers)


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
    body = envelope(
        ok=False,
        type=type_,
        action=action,
        data=data,
        message=message,
        meta=meta,
    )
    return JSONResponse(body, status_code=status_code, headers=headers)


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
            msg = "Malformed JSON body"
        errors.append({"field": _field_path(err.get("loc", ())), "message": msg})
    first = errors[0] if errors else {"field": "request", "message": "invalid"}
    message = f"Invalid request: {first['field']}: {first['message']}"
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more)"
    return error_response(422, "validation_error", message, meta={"errors": errors})


async def handle_http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    # Auth failures keep the {"detail": ...} shape the spec prescribes.
    is_auth_throttle = exc.status_code == 429 and request.url.path.startswith("/api/v1/auth")
    if exc.status_code == 401 or is_auth_throttle:
        return JSONResponse(
            {"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers
        )
    if exc.status_code == 404:
        message = "Not found"
    elif exc.status_code == 405:
        message = "Method not allowed"
    else:
        message = str(exc.detail) if exc.detail else "Request failed"
    return error_response(exc.status_code, "error", message, headers=exc.headers)


async def handle_unexpected(request: Request, exc: Exception) -> JSONResponse:
    # Log the traceback server-side only; the client gets a generic envelope.
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(500, "error", "Internal server error")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ServiceError, handle_service_error)
    app.add_exception_handler(RequestValidationError, handle_validation_error)
    app.add_exception_handler(StarletteHTTPException, handle_http_error)
    app.add_exception_handler(Exception, handle_unexpected)
