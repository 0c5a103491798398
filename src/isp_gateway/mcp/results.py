"""What a tool call answers: the sentence for the customer first, the data (as structured
content and as JSON text), and an `agent_hint` for the model when it has a next step.

Every error names its cause: `error` (an action, or `invalid_arguments`, `unknown_tool`,
`internal_error`), the sentence, and what the cause carries (the missing scope, the refusal's
`reason`, the closest subject, the seconds to wait).
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
from pydantic import ValidationError

from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.kit.errors import Locked, ServiceError

HINT = "agent_hint"

_TEMPORARY = (
    "A temporary failure on the provider's side: tell the customer you cannot check right "
    "now and try again later; never present it as 'not found' or 'nothing owed'."
)
# The next step for the agent after a service's refusal, by its action.
_SERVICE_HINTS: dict[str, str] = {
    Action.CLIENT_NOT_FOUND: (
        "Nothing matches: ask the customer to check the value, or try another of phone, "
        "document or service_id."
    ),
    Action.INVALID_PHONE: "Ask the customer to repeat the phone: at least 7 digits.",
    Action.INVALID_DOCUMENT: "Ask for the document again: 3 to 20 letters or digits.",
    Action.CLIENT_VERIFICATION_FAILED: (
        "Ask the customer for what `missing` names and pass the name, the address and the "
        "plan (plan_name or plan_price) as the customer says them."
    ),
    Action.CLIENT_VERIFICATION_LOCKED: (
        "Verification of this service is locked for retry_after seconds; do not retry before."
    ),
    Action.RATE_LIMITED: "Slow down: wait retry_after seconds before the next call.",
    Action.IDEMPOTENCY_KEY_REUSED: (
        "That idempotency_key was used for another request: a new request needs a new key."
    ),
    Action.IDEMPOTENCY_KEY_IN_PROGRESS: (
        "The first request with this key is still running: retry in a few seconds, same key."
    ),
    Action.TICKET_CREATION_FAILED: (
        "No ticket was opened (see reason). Retrying later with the same idempotency_key is "
        "safe: it never opens a second ticket."
    ),
    Action.INTERNET_PLAN_NOT_FOUND: "list_internet_plans lists every plan.",
    Action.UPSTREAM_UNAVAILABLE: _TEMPORARY,
    Action.UPSTREAM_UNAUTHORIZED: _TEMPORARY,
    Action.UPSTREAM_RATE_LIMITED: _TEMPORARY,
    Action.UPSTREAM_REFUSED_CLIENT_FETCH: _TEMPORARY,
    Action.STORE_UNAVAILABLE: _TEMPORARY,
}
# verify_customer's argument for a fact REST's verify names otherwise.
_ARGUMENTS = {"internet_plan_name": "plan_name", "internet_plan_price": "plan_price"}
VERIFY_FIRST_HINT = (
    "Call find_customer, then verify_customer with what the customer states, and pass the "
    "verification_id it returns (valid only for that service, in this conversation)."
)


def result(
    data: dict[str, Any], sentence: str, hint: str | None = None, *, error: bool = False
) -> types.CallToolResult:
    if hint:
        data = {**data, HINT: hint}
    # The sentence first (what a bot says), then the data as JSON text for clients that do
    # not read structured content (the MCP spec's advice).
    content: list[types.ContentBlock] = [
        types.TextContent(type="text", text=sentence),
        types.TextContent(type="text", text=json.dumps(data, ensure_ascii=False, default=str)),
    ]
    return types.CallToolResult(content=content, structured_content=data, is_error=error)


def failure(
    code: str, sentence: str, hint: str | None = None, **extra: Any
) -> types.CallToolResult:
    return result({"error": code, "message": sentence, **extra}, sentence, hint, error=True)


def service_failure(exc: ServiceError) -> types.CallToolResult:
    """A service's refusal: its catalogue text when it is a sentence for the customer (the
    cause named: 'the subject ... is not in the catalogue'), the action's sentence when the
    text is a developer's (then in `cause`, for the agent) or REST's pinned wording."""
    extra: dict[str, Any] = {}
    if isinstance(exc.data, dict) and "missing" in exc.data:
        # Too few facts to verify (CALLERS.md 6): the sentence names what would complete it,
        # `missing` the tool's arguments (REST's body calls the plan internet_plan_name,
        # which verify_customer refuses as an unknown argument).
        extra["missing"] = [_ARGUMENTS.get(fact, fact) for fact in exc.data["missing"]]
    if messages.is_technical(exc.action, exc.variant):
        sentence = messages.sentence(exc.action, messages.say(Action.ERROR))
        extra["cause"] = exc.message
    elif messages.is_pinned(exc.action, exc.variant):
        # REST's words as the spec quotes them ('Client not found' in a Spanish deployment,
        # 'Cliente no encontrado' in an English one): the customer gets the action's own
        # sentence in MESSAGES_LANGUAGE instead.
        own = not messages.is_pinned(exc.action, "")
        sentence = messages.say(exc.action) if own else messages.say(Action.ERROR)
    else:
        sentence = exc.message
    reason = (exc.meta or {}).get("reason")
    if reason:
        extra["reason"] = reason
    if isinstance(exc, Locked):
        extra["retry_after"] = exc.retry_after
    elif "Retry-After" in exc.headers:
        extra["retry_after"] = int(exc.headers["Retry-After"])
    return failure(exc.action, sentence, _SERVICE_HINTS.get(exc.action), **extra)


def verification_required() -> types.CallToolResult:
    return failure(
        Action.VERIFICATION_REQUIRED,
        messages.say(Action.VERIFICATION_REQUIRED),
        VERIFY_FIRST_HINT,
    )


def invalid(exc: ValidationError) -> types.CallToolResult:
    # Names and reasons only: pydantic's messages do not repeat the values.
    problems = [
        f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
        for err in exc.errors()
    ]
    joined = "; ".join(problems)
    return failure(
        "invalid_arguments",
        messages.say(Action.VALIDATION_ERROR, "arguments", problems=joined),
        "Fix the arguments named and call again; the tool's input schema lists them.",
    )


def missing_scope(tool: str, scope: str) -> types.CallToolResult:
    """A known tool the credential may not call (issue 28.1): the scope it lacks, named."""
    return failure(
        Action.INSUFFICIENT_SCOPE,
        messages.say(Action.INSUFFICIENT_SCOPE, "scope", scope=scope),
        f"{tool} needs the API-key scope {scope}, which this key has not got. Ask the "
        "operator for a key with it, or go on without this tool.",
        required=scope,
        tool=tool,
    )
