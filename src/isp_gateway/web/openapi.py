"""The OpenAPI document as a contract: what every route answers, not only its success.

Routes declare their own error statuses with `envelope.error_responses(...)`. The answers
that do not depend on the route are added here to every operation where they apply, so a new
route cannot forget them:
- 401 `{detail}` + `WWW-Authenticate` on every operation that needs a token;
- 405 (envelope, `Allow`) everywhere; 413 `payload_too_large` where a body is read;
- 429 `rate_limited` on /api/v1 (the service's own limit, when configured);
- 422 in the envelope (`validation_error`) instead of FastAPI's `{detail: [...]}`;
- every 2xx answer's `action` values (SUCCESS_ACTIONS: an enum on `action` and a list in the
  description), and 503 `store_unavailable` with `Retry-After` on every /api/v1 operation
  (it can occur wherever a Redis is configured; listed always, as one document serves both).
The ticket subject catalogue this deployment uses becomes the enum of `subject`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel

from isp_gateway.kit.actions import Action
from isp_gateway.kit.messages import Language
from isp_gateway.settings import Settings
from isp_gateway.web.envelope import AuthError, ErrorResponse, error_response_doc
from isp_gateway.web.examples import envelope_example

TOKEN_PATH = "/api/v1/auth/token"  # noqa: S105 - a path, not a secret
_REF = "#/components/schemas/{model}"
_METHODS = frozenset({"get", "put", "post", "delete", "patch", "options", "head", "trace"})
_FASTAPI_422 = ("HTTPValidationError", "ValidationError")

# A repeat with the same Idempotency-Key gets its first answer back: the success, or a final
# 409 refusal (kit/idempotency.py), marked with this header.
_REPLAYED = {
    "description": "`true` when this is the first answer of an earlier request with the same "
    "`Idempotency-Key`, sent again (nothing was done twice); absent otherwise",
    "schema": {"type": "string", "enum": ["true"]},
}

AUTH_401 = {
    "description": "Missing, invalid or expired token, or an unknown or revoked API key: "
    "`{detail: 'Could not validate credentials.'}`; get a new token (a token lasts "
    "JWT_ACCESS_TOKEN_EXPIRE_MINUTES), or ask the operator for a valid key",
    "headers": {"WWW-Authenticate": {"description": "Bearer", "schema": {"type": "string"}}},
    "content": {"application/json": {"schema": {"$ref": _REF.format(model="AuthError")}}},
}


# What each operation answers on success (CALLERS.md 2 "OpenAPI"), `info` ones included:
# read from the handlers and the services they call. A route missing here fails the
# contract test, so a new route cannot leave its outcomes undocumented.
_PING_OUTCOMES = (
    Action.STABLE_CONNECTION,
    Action.INTERMITTENT_CONNECTION,
    Action.NO_INTERNET,
    Action.PING_FAILED,
    Action.PING_PENDING,
)
SUCCESS_ACTIONS: dict[tuple[str, str], tuple[str | None, ...]] = {
    ("get", "/health"): (None,),
    ("get", "/api/v1/clients/"): (Action.CLIENTS_LISTED,),
    ("get", "/api/v1/clients/search"): (Action.CLIENTS_LISTED, Action.CLIENT_NOT_FOUND),
    ("get", "/api/v1/clients/by-document/{document}"): (Action.CLIENT_FOUND,),
    ("get", "/api/v1/clients/by-phone/{phone}"): (Action.CLIENT_FOUND,),
    ("get", "/api/v1/clients/by-service-id/{service_id}"): (Action.CLIENT_FOUND,),
    ("post", "/api/v1/clients/resolve"): (Action.CLIENT_VERIFIED,),
    ("post", "/api/v1/clients/{service_id}/verify"): (
        Action.CLIENT_VERIFIED,
        Action.CLIENT_VERIFICATION_FAILED,
    ),
    ("put", "/api/v1/clients/{service_id}"): (Action.CLIENT_UPDATED,),
    ("get", "/api/v1/tickets/subjects"): (Action.TICKET_SUBJECTS_LISTED,),
    ("get", "/api/v1/tickets/zone-blocked/{zone_id}"): (Action.TICKET_FOUND,),
    ("post", "/api/v1/tickets"): (Action.TICKET_CREATED,),
    ("get", "/api/v1/tickets/{ticket_id}"): (Action.TICKET_FOUND,),
    ("post", "/api/v1/{service_id}/ping/"): (Action.PING_CREATED,),
    ("get", "/api/v1/ping/{task_id}/"): _PING_OUTCOMES,
    ("get", "/api/v1/internet-plans/"): (
        Action.INTERNET_PLANS_LISTED,
        Action.INTERNET_PLAN_NOT_FOUND,
    ),
    ("get", "/api/v1/internet-plans/{plan_id}"): (Action.INTERNET_PLAN_FOUND,),
    ("get", "/api/v1/clients/{service_id}/account"): (Action.ACCOUNT_FOUND,),
    ("get", "/api/v1/payment-methods"): (Action.PAYMENT_METHODS_LISTED,),
    ("get", "/api/v1/clients/{service_id}/tickets"): (Action.TICKETS_LISTED,),
    ("post", "/api/v1/clients/{service_id}/diagnose"): (
        Action.SERVICE_CANCELLED,
        Action.SERVICE_SUSPENDED,
        Action.ZONE_OUTAGE,
        *_PING_OUTCOMES,
    ),
    ("get", "/api/v1/audit"): (Action.AUDIT_LISTED,),
    ("get", "/api/v1/outages"): (Action.OUTAGES_LISTED,),
    ("post", "/api/v1/clients/{service_id}/payment-promise"): (Action.PAYMENT_PROMISE_CREATED,),
    ("post", "/api/v1/clients/{service_id}/payment-reports"): (Action.PAYMENT_REPORT_RECEIVED,),
}
STORE_UNAVAILABLE = Action.STORE_UNAVAILABLE
_STORE_503 = (
    "The service's shared store (Redis, with REDIS_URL or REDIS_SENTINELS set) does not "
    "answer; retry after `Retry-After`"
)
TOKEN_503 = {
    "description": _STORE_503 + ": `{detail}`",
    "headers": {"Retry-After": {"description": "Seconds to wait before trying again",
                                "schema": {"type": "integer"}}},
    "content": {"application/json": {"schema": {"$ref": _REF.format(model="AuthError")}}},
}  # fmt: skip


def _success_actions(method: str, path: str, responses: dict[str, Any]) -> None:
    """Pin the `action` values of an operation's 2xx envelope answers."""
    values = SUCCESS_ACTIONS.get((method, path))
    if values is None:
        return
    for status, response in responses.items():
        if not status.startswith("2"):
            continue
        schema = response.get("content", {}).get("application/json", {}).get("schema")
        if schema is None:
            continue
        schema.setdefault("properties", {})["action"] = {"enum": list(values)}
        listed = ", ".join("null" if v is None else f"`{v}`" for v in values)
        response["description"] = f"{response.get('description', 'Success')}. `action`: {listed}."


def _store_unavailable(path: str, responses: dict[str, Any]) -> None:
    """503 `store_unavailable` (with `Retry-After`) on every /api/v1 operation."""
    if path == TOKEN_PATH:
        responses.setdefault("503", TOKEN_503)
        return
    given = responses.get("503")
    if given is None:
        given = response_object(503, [STORE_UNAVAILABLE])
        given["description"] = f"{_STORE_503}. `action`: `{STORE_UNAVAILABLE}`."
        responses["503"] = given
        return
    # A copy: a route's `responses=` may be a constant several routes share.
    given = responses["503"] = copy.deepcopy(given)
    enum = given["content"]["application/json"]["schema"]["properties"]["action"]["enum"]
    if STORE_UNAVAILABLE not in enum:
        enum.append(STORE_UNAVAILABLE)
        given["description"] = given["description"].rstrip(".") + (
            f", `{STORE_UNAVAILABLE}` ({_STORE_503[0].lower()}{_STORE_503[1:]})."
        )


def response_object(status: int, actions: list[str] | None = None) -> dict[str, Any]:
    """An OpenAPI response object for an error status, in the envelope."""
    doc = error_response_doc(status, actions)
    model: type[BaseModel] = doc.pop("model")
    schema = doc.pop("content", {}).get("application/json", {}).get("schema", {})
    doc["content"] = {
        "application/json": {"schema": {"$ref": _REF.format(model=model.__name__), **schema}}
    }
    return doc


def _scope_403(security: list[dict[str, list[str]]]) -> dict[str, Any]:
    """CALLERS.md 3: a valid credential without the operation's scope."""
    scopes = sorted(
        {scope for requirement in security for scope in next(iter(requirement.values()), [])}
    )
    doc = response_object(403, [Action.INSUFFICIENT_SCOPE])
    named = ", ".join(f"`{scope}`" for scope in scopes) or "its scope"
    doc["description"] = (
        f"The API key lacks the scope {named} (`data.required` names it). "
        "`action`: `insufficient_scope`."
    )
    return doc


def _add_scope_403(responses: dict[str, Any], security: list[dict[str, list[str]]]) -> None:
    """The scope's 403, beside a 403 the route declares itself (the verification guard's)."""
    scope_403 = _scope_403(security)
    own = responses.get("403")
    if own is None:
        responses["403"] = scope_403
        return
    schema = own.get("content", {}).get("application/json", {}).get("schema", {})
    action = schema.get("properties", {}).get("action", {})
    if "enum" in action and Action.INSUFFICIENT_SCOPE not in action["enum"]:
        action["enum"] = [Action.INSUFFICIENT_SCOPE, *action["enum"]]
    own["description"] = scope_403["description"] + " Or: " + own.get("description", "")


def _complete(
    schema: dict[str, Any],
    settings: Settings,
    completions: Sequence[Callable[[dict[str, Any]], None]],
    names: dict[tuple[str, str], str] | None = None,
) -> None:
    _short_operation_ids(schema, names or {})
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
                _add_scope_403(responses, operation["security"])
            responses.setdefault("405", response_object(405))
            if "requestBody" in operation:
                responses.setdefault("413", response_object(413))
            if path.startswith("/api/v1/") and path != TOKEN_PATH:
                responses.setdefault("429", response_object(429))
            if path.startswith("/api/v1/"):
                _store_unavailable(path, responses)
            _success_actions(method, path, responses)
            if any(p.get("name") == "Idempotency-Key" for p in operation.get("parameters", [])):
                for status, response in responses.items():
                    if status.startswith("2") or status == "409":
                        response.setdefault("headers", {})["Idempotent-Replayed"] = _REPLAYED
            operation["responses"] = dict(sorted(responses.items()))
    if '/HTTPValidationError"' not in json.dumps(schema["paths"]):
        for name in _FASTAPI_422:
            components.pop(name, None)
    for complete in completions:
        complete(components)
    _name_envelopes(schema, Language(settings.MESSAGES_LANGUAGE))


def _short_operation_ids(document: dict[str, Any], names: dict[tuple[str, str], str]) -> None:
    """Issue 28.14: an operation's id is its handler's name (`get_client_by_document`, not
    FastAPI's `get_client_by_document_api_v1_clients_by_document__document__get`), what a
    generated client names its function; a form body's schema is named after it too."""
    renamed: dict[str, str] = {}
    for path, item in document.get("paths", {}).items():
        for method, operation in item.items():
            name = names.get((method, path))
            if method not in _METHODS or name is None:
                continue
            old = operation.get("operationId", "")
            operation["operationId"] = name
            renamed[f"Body_{old}"] = f"{_pascal(name)}Form"
    seen = [op["operationId"] for item in document["paths"].values() for op in item.values()]
    assert len(seen) == len(set(seen)), "two operations share a handler's name"
    components = document.get("components", {}).get("schemas", {})
    text = json.dumps(document)
    for old, new in renamed.items():
        if old in components:
            text = text.replace(f'"{_REF.format(model=old)}"', f'"{_REF.format(model=new)}"')
    fixed = json.loads(text)
    for old, new in renamed.items():
        if old in fixed["components"]["schemas"]:
            body = fixed["components"]["schemas"].pop(old)
            fixed["components"]["schemas"][new] = {**body, "title": new}
    document.clear()
    document.update(fixed)


def _pascal(text: str) -> str:
    return "".join(part.capitalize() for part in text.split("_") if part)


def _envelope_name(values: list[str | None], status: str, operation_id: str) -> str:
    """A response's schema name from its actions (`ClientFoundResponse`, `InvalidPhoneError`,
    `UpstreamRateLimitedOrStoreUnavailableError`); past two actions, from its operation and
    status (`CreateTicket409Error`)."""
    suffix = "Response" if status.startswith("2") else "Error"
    names = [Action(value).name if value is not None else "NONE" for value in values]
    if len(names) > 2:
        return f"{_pascal(operation_id)}{status}{suffix}"
    # `error` is the generic error; `validation_error` no ValidationErrorError.
    words = ["GENERIC" if n == "ERROR" else n.removesuffix("_ERROR") for n in names]
    return "Or".join(_pascal(word) for word in words) + suffix


def _name_envelopes(document: dict[str, Any], language: Language) -> None:
    """Issue 28.10-11: every answer's envelope as a named schema with its `action` enum
    inside (a generator keeps an enum in a schema, not one beside a `$ref`), and a whole
    example answer per action. Responses with the same actions and the same envelope share
    one schema; the generic envelopes they came from are dropped once unused."""
    components: dict[str, Any] = document["components"]["schemas"]
    made: dict[str, str] = {}
    for item in document["paths"].values():
        for method, operation in item.items():
            if method not in _METHODS:
                continue
            for status, response in operation.get("responses", {}).items():
                media = response.get("content", {}).get("application/json")
                schema = media.get("schema", {}) if media else {}
                action = schema.get("properties", {}).get("action")
                if "$ref" not in schema or not isinstance(action, dict) or "enum" not in action:
                    continue
                values: list[str | None] = list(action["enum"])
                envelope = copy.deepcopy(components[schema["$ref"].rsplit("/", 1)[-1]])
                strings = [value for value in values if value is not None]
                envelope["properties"]["action"] = {"type": "string", "enum": strings}
                if "action" not in envelope.setdefault("required", []):
                    envelope["required"].append("action")
                operation_id = operation.get("operationId", "")
                name = _envelope_name(values, status, operation_id)
                fingerprint = json.dumps(envelope, sort_keys=True)
                if made.get(name, fingerprint) != fingerprint:
                    name = _pascal(operation_id) + name  # the same actions, another `data`
                made[name] = fingerprint
                components[name] = {**envelope, "title": name}
                media["schema"] = {"$ref": _REF.format(model=name)}
                data = envelope["properties"].get("data")
                media["examples"] = {
                    str(value): {
                        "summary": f"`{value}`",
                        "value": envelope_example(
                            value, int(status), data, components, language, operation_id
                        ),
                    }
                    for value in values
                }
    used = json.dumps(document["paths"]) + json.dumps(
        {
            name: schema
            for name, schema in components.items()
            if name not in _generic_envelopes(components)
        }
    )
    for name in _generic_envelopes(components):
        if f'/{name}"' not in used:
            del components[name]


def _generic_envelopes(components: dict[str, Any]) -> list[str]:
    """The generic envelopes the named ones are made from."""
    return [n for n in components if n.startswith("BackendResponse") or n == "ErrorResponse"]


def install_openapi(
    app: FastAPI,
    settings: Settings,
    completions: Sequence[Callable[[dict[str, Any]], None]] = (),
) -> None:
    """Make `app.openapi()` build the completed document (once; FastAPI caches it).
    `completions` are what features add to the document's components (the ticket
    subjects this deployment loads)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            names = {
                (method.lower(), route.path): route.name
                for route in app.routes
                if isinstance(route, APIRoute) and route.include_in_schema
                for method in route.methods or ()
            }
            _complete(build(), settings, completions, names)
        assert app.openapi_schema is not None
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
