"""The OpenAPI document as a contract: what every route answers, not only its success.

Routes declare their own error statuses with `envelope.error_responses(...)`. The answers
that do not depend on the route are added here to every operation where they apply, so a new
route cannot forget them:
- 401 `{detail}` + `WWW-Authenticate` on every operation that needs a token;
- 405 (envelope, `Allow`) everywhere; 413 `payload_too_large` where a body is read;
- 429 `rate_limited` on /api/v1 (the service's own limit, when configured);
- 422 in the envelope (`validation_error`) instead of FastAPI's `{detail: [...]}`.
The ticket subject catalogue this deployment uses becomes the enum of `subject`.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

from isp_gateway.envelope import AuthError, ErrorResponse, error_response_doc
from isp_gateway.settings import ConfigurationError, Settings
from isp_gateway.tickets.subjects import SubjectCatalogue

TOKEN_PATH = "/api/v1/auth/token"  # noqa: S105 - a path, not a secret
_REF = "#/components/schemas/{model}"
_METHODS = frozenset({"get", "put", "post", "delete", "patch", "options", "head", "trace"})
_FASTAPI_422 = ("HTTPValidationError", "ValidationError")

AUTH_401 = {
    "description": "Missing, invalid or expired token: `{detail: 'Could not validate "
    "credentials.'}`; get a new token",
    "headers": {"WWW-Authenticate": {"description": "Bearer", "schema": {"type": "string"}}},
    "content": {"application/json": {"schema": {"$ref": _REF.format(model="AuthError")}}},
}


def response_object(status: int, actions: list[str] | None = None) -> dict[str, Any]:
    """An OpenAPI response object for an error status, in the envelope."""
    doc = error_response_doc(status, actions)
    model: type[BaseModel] = doc.pop("model")
    schema = doc.pop("content", {}).get("application/json", {}).get("schema", {})
    doc["content"] = {
        "application/json": {"schema": {"$ref": _REF.format(model=model.__name__), **schema}}
    }
    return doc


def _complete(schema: dict[str, Any], settings: Settings) -> None:
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for model in (ErrorResponse, AuthError):
        components.setdefault(model.__name__, model.model_json_schema(ref_template=_REF))
    for path, item in schema.get("paths", {}).items():
        for method, operation in item.items():
            if method not in _METHODS:
                continue
            responses: dict[str, Any] = operation.setdefault("responses", {})
            own_422 = responses.get("422")
            if own_422 is not None and any(name in json.dumps(own_422) for name in _FASTAPI_422):
                responses["422"] = response_object(422)
            if operation.get("security"):
                responses.setdefault("401", AUTH_401)
            responses.setdefault("405", response_object(405))
            if "requestBody" in operation:
                responses.setdefault("413", response_object(413))
            if path.startswith("/api/v1/") and path != TOKEN_PATH:
                responses.setdefault("429", response_object(429))
            operation["responses"] = dict(sorted(responses.items()))
    if '/HTTPValidationError"' not in json.dumps(schema["paths"]):
        for name in _FASTAPI_422:
            components.pop(name, None)
    _subject_enum(components, settings)


def _subject_enum(components: dict[str, Any], settings: Settings) -> None:
    """The subjects a ticket may have, from the catalogue this deployment loads."""
    try:
        catalogue = SubjectCatalogue.load(settings.TICKET_SUBJECTS_FILE)
    except ConfigurationError:
        return  # the lifespan stops start-up with the message
    subject = components.get("CreateTicketRequest", {}).get("properties", {}).get("subject")
    if subject is not None:
        subject["enum"] = catalogue.as_data()["all"]
        subject["description"] = (
            subject.get("description", "") + " (the `all` list of GET /api/v1/tickets/subjects)"
        ).strip()


def install_openapi(app: FastAPI, settings: Settings) -> None:
    """Make `app.openapi()` build the completed document (once; FastAPI caches it)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            _complete(build(), settings)
        assert app.openapi_schema is not None
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
