"""/mcp: the Model Context Protocol over streamable HTTP, stateless, in the REST process.

The official SDK's low-level `Server` with two handlers (list tools, call a tool) behind the
SDK's `StreamableHTTPSessionManager` in stateless mode with JSON answers: no session lives
in a worker, so any worker of `serve --workers N` answers any request. State that must
outlive a request (verification ids, throttles, caches) is in the store, as for REST.

In front of the SDK, `McpEndpoint` (endpoint.py) authenticates every request with the REST
credentials (auth.py) and puts the caller and its scopes in the ASGI scope, where the
handlers read them back through the SDK's request context. This module is imported by the
first /mcp request only (endpoint.py says why).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import ValidationError

from isp_gateway.kit import deadline, messages
from isp_gateway.kit.actions import Action
from isp_gateway.kit.callers import set_current_caller
from isp_gateway.kit.errors import Locked, ServiceError
from isp_gateway.kit.verifications import VerificationRequired
from isp_gateway.mcp.auth import allows
from isp_gateway.mcp.request import SCOPE_KEY, McpRequest
from isp_gateway.mcp.tools import BY_NAME, TOOLS, Call, Outcome, ToolFailure, run, target

if TYPE_CHECKING:
    pass

log = logging.getLogger("isp_gateway.mcp")

INSTRUCTIONS = (
    "Tools of an internet service provider's support desk. Always: 1) find_customer by the "
    "phone, document or service id the customer gives (it returns service ids only); "
    "2) verify_customer with the name, the address and the plan name or price exactly as "
    "the customer states them; 3) act with the verification_id it returns. Never ask the "
    "tools for data of a customer who did not verify. Read the Spanish sentence of each "
    "result to the customer."
)

MSG_VERIFY_FIRST = (
    "Primero verifique la identidad del titular: find_customer, luego verify_customer, y use "
    "el verification_id que devuelve (vale solo para ese servicio y esta conversación)."
)
MSG_INTERNAL = "Ocurrió un error interno; intente de nuevo en un momento."


def _request_of(ctx: ServerRequestContext[Any, Any]) -> McpRequest:
    scope = getattr(ctx.request, "scope", None)
    found = scope.get(SCOPE_KEY) if isinstance(scope, dict) else None
    if not isinstance(found, McpRequest):
        # Only reachable if the SDK were served without McpEndpoint in front.
        raise RuntimeError("MCP request without an authenticated caller")
    return found


def _result(data: dict[str, Any], sentence: str, *, error: bool) -> types.CallToolResult:
    # The sentence first (what a bot says), then the data as JSON text for clients that do
    # not read structured content (the MCP spec's advice).
    content: list[types.ContentBlock] = [
        types.TextContent(type="text", text=sentence),
        types.TextContent(type="text", text=json.dumps(data, ensure_ascii=False, default=str)),
    ]
    return types.CallToolResult(content=content, structured_content=data, is_error=error)


def _failure(code: str, sentence: str, **extra: Any) -> types.CallToolResult:
    return _result({"error": code, "message": sentence, **extra}, sentence, error=True)


def _service_failure(exc: ServiceError) -> types.CallToolResult:
    # The catalogue's customer sentence (kit/messages.py); none of them names a customer.
    sentence = messages.sentence(exc.action, exc.message)
    if isinstance(exc, Locked):
        return _failure(exc.action, sentence, retry_after=exc.retry_after)
    if isinstance(exc.data, dict) and "missing" in exc.data:
        # Too few facts to verify (CALLERS.md 6): the sentence names what would complete it.
        return _failure(exc.action, exc.message, missing=exc.data["missing"])
    return _failure(exc.action, sentence)


def _invalid(exc: ValidationError) -> types.CallToolResult:
    # Names and reasons only: pydantic's messages do not repeat the values.
    problems = [
        f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
        for err in exc.errors()
    ]
    return _failure("invalid_arguments", "Argumentos inválidos: " + "; ".join(problems))


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    request = _request_of(ctx)
    tools = [
        types.Tool(
            name=spec.name,
            description=spec.description,
            input_schema=spec.input_schema(),
            annotations=types.ToolAnnotations(read_only_hint=spec.read_only, open_world_hint=False),
        )
        for spec in TOOLS
        if allows(request.scopes, spec.scope)
    ]
    return types.ListToolsResult(tools=tools)


async def call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> types.CallToolResult:
    """Every tool call, audited (CALLERS.md 4 and 6) once its outcome is decided, before
    the answer is sent: `mcp_tool` (the tool's name, `ok` or `error`, and the service its
    verification names). A call that served a customer is kept one by one; any other (a
    catalogue, a lookup, a refusal, an error) is counted per caller, tool and minute, so no
    key can flush the customer reads out of the audit with calls about no one. A refusal
    for a missing, unknown, expired or foreign verification id is also counted as
    `verification_required`."""
    result, service_id = await _call_tool(ctx, params)
    request = _request_of(ctx)
    # A name the server does not know is the agent's text: it is not repeated in the audit.
    tool = params.name if params.name in BY_NAME else "unknown"
    code = (result.structured_content or {}).get("error") if result.is_error else None
    details: dict[str, Any] = {"tool": tool}
    if isinstance(code, str):
        details["error"] = code
    audit = request.runtime.audit
    outcome = "error" if result.is_error else "ok"
    if code == Action.VERIFICATION_REQUIRED:
        audit.count(Action.VERIFICATION_REQUIRED, "refused", details={"tool": tool}, kind=tool)
    if service_id is None or result.is_error:
        kind = f"{tool}:{code}" if isinstance(code, str) else tool
        audit.count("mcp_tool", outcome, service_id=service_id, details=details, kind=kind)
        return result
    try:
        await audit.record("mcp_tool", outcome, service_id=service_id, details=details)
    except ServiceError as exc:
        # The store is away (the log line was written): the agent still gets its answer.
        log.warning("mcp tool %s: audit event not stored (%s)", tool, exc.action)
    return result


async def _call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> tuple[types.CallToolResult, int | None]:
    """The tool's result, and the service it was about (None for a call about none)."""
    request = _request_of(ctx)
    # The handler may run in a task of the SDK's own: the caller is set here too, for the
    # rules below that key on it (the upstream budget's fair share).
    set_current_caller(request.caller)
    spec = BY_NAME.get(params.name)
    if spec is None or not allows(request.scopes, spec.scope):
        # A tool the credential lacks the scope for is neither listed nor callable.
        return _failure("unknown_tool", "Esa herramienta no existe o no está disponible."), None
    try:
        args = spec.args.model_validate(params.arguments or {})
    except ValidationError as exc:
        return _invalid(exc), None
    runtime = request.runtime
    settings = runtime.settings
    # Every answer within UPSTREAM_TIMEOUT_SECONDS + 2 s, as on REST (CALLERS.md 2).
    deadline.adopt(request.deadline)
    call = Call(
        services=runtime.services,
        verifications=runtime.services.verifications,
        settings=settings,
        caller=request.caller,
    )
    service_id: int | None = None
    try:
        service_id = await target(spec, call, args)
        outcome: Outcome = await run(spec, call, args, service_id)
    except VerificationRequired:
        return _failure(Action.VERIFICATION_REQUIRED, MSG_VERIFY_FIRST), service_id
    except ToolFailure as failure:
        return _failure(failure.code, failure.sentence), service_id
    except ServiceError as exc:
        return _service_failure(exc), service_id
    except ValidationError as exc:
        return _invalid(exc), service_id
    except Exception as exc:  # the agent gets a sentence; the log the kind, no traceback
        log.error("mcp tool %s failed: %s", spec.name, type(exc).__name__)
        return _failure("internal_error", MSG_INTERNAL), service_id
    return _result(outcome.data, outcome.sentence, error=False), service_id


def build_server() -> Server[Any]:
    return Server(
        "isp-gateway",
        version="1.0.0",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def session_manager() -> StreamableHTTPSessionManager:
    """The SDK's session manager for one run of the app (mcp/endpoint.py starts it)."""
    # Stateless, the SDK's transport logs "Terminating session: None" at INFO after every
    # request (one useless line per tool call), and its manager a start line in the middle
    # of the first agent's request. Their warnings and errors still show.
    for name in ("mcp.server.streamable_http", "mcp.server.streamable_http_manager"):
        logging.getLogger(name).setLevel(logging.WARNING)
    return StreamableHTTPSessionManager(
        app=build_server(),
        stateless=True,
        json_response=True,
        # The Bearer credential is what protects /mcp (a browser never sends it on its
        # own), and the service sits behind real host names, not only loopback.
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
