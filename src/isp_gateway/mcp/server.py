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

import logging
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import ValidationError

from isp_gateway.kit import deadline, messages
from isp_gateway.kit.actions import Action
from isp_gateway.kit.callers import set_current_caller
from isp_gateway.kit.errors import ServiceError
from isp_gateway.kit.verifications import VerificationRequired
from isp_gateway.mcp import results
from isp_gateway.mcp.auth import allows
from isp_gateway.mcp.instructions import current_scopes, instructions_for
from isp_gateway.mcp.request import SCOPE_KEY, McpRequest
from isp_gateway.mcp.tools import BY_NAME, TOOLS, Call, Outcome, ToolFailure, run, target

log = logging.getLogger("isp_gateway.mcp")


def _request_of(ctx: ServerRequestContext[Any, Any]) -> McpRequest:
    scope = getattr(ctx.request, "scope", None)
    found = scope.get(SCOPE_KEY) if isinstance(scope, dict) else None
    if not isinstance(found, McpRequest):
        # Only reachable if the SDK were served without McpEndpoint in front.
        raise RuntimeError("MCP request without an authenticated caller")
    return found


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    """The tools this credential may call (a key lists only its scopes' tools)."""
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
    verification names). A call that served a customer is kept one by one, the first of
    its caller, tool and customer in a minute (the same read again within it is counted:
    a verified agent looping one tool cannot flush the others' reads either); any other (a
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
        await audit.record_once_a_minute("mcp_tool", outcome, service_id, details, kind=tool)
    except ServiceError as exc:
        # The store is away (the log line was written): the agent still gets its answer.
        log.warning("mcp tool %s: audit event not stored (%s)", tool, exc.action)
    return result


def _unknown_tool(scopes: frozenset[str]) -> types.CallToolResult:
    usable = ", ".join(spec.name for spec in TOOLS if allows(scopes, spec.scope))
    return results.failure(
        "unknown_tool",
        messages.say(Action.ERROR, "unknown_tool"),
        f"The tools this key can call: {usable or 'none'}.",
    )


async def _call_tool(
    ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
) -> tuple[types.CallToolResult, int | None]:
    """The tool's result, and the service it was about (None for a call about none)."""
    request = _request_of(ctx)
    # The handler may run in a task of the SDK's own: the caller and the language are set
    # here too, for the rules below that key on them (the upstream budget's fair share).
    set_current_caller(request.caller)
    messages.use_language(request.language)
    spec = BY_NAME.get(params.name)
    if spec is None:
        return _unknown_tool(request.scopes), None
    if not allows(request.scopes, spec.scope):
        # Not listed for this credential, and refused naming the scope it lacks.
        return results.missing_scope(spec.name, spec.scope), None
    arguments = params.arguments or {}
    if spec.verified and arguments.get("verification_id") in (None, ""):
        # Required in the schema; without one, the guard's own answer: verify first.
        return results.verification_required(), None
    try:
        args = spec.args.model_validate(arguments)
    except ValidationError as exc:
        return results.invalid(exc), None
    # Every answer within UPSTREAM_TIMEOUT_SECONDS + 2 s, as on REST (CALLERS.md 2).
    deadline.adopt(request.deadline)
    runtime, settings = request.runtime, request.runtime.settings
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
        return results.verification_required(), service_id
    except ToolFailure as failure:
        hint, data = failure.hint, failure.data
        return results.failure(failure.code, failure.sentence, hint, **data), service_id
    except ServiceError as exc:
        return results.service_failure(exc), service_id
    except ValidationError as exc:
        return results.invalid(exc), service_id
    except Exception as exc:  # the agent gets a sentence; the log the kind, no traceback
        log.error("mcp tool %s failed: %s", spec.name, type(exc).__name__)
        return results.failure("internal_error", messages.say(Action.ERROR)), service_id
    return results.result(outcome.data, outcome.sentence, outcome.hint), service_id


class GatewayMcpServer(Server[Any]):
    """The SDK's server, whose instructions are those of the caller's key (instructions.py):
    read from the request's context when the SDK builds its `initialize` answer."""

    @property
    def instructions(self) -> str:
        return instructions_for(current_scopes())

    @instructions.setter
    def instructions(self, _: str | None) -> None:
        """The SDK sets them once at construction; they are the caller's, not fixed."""


def build_server() -> Server[Any]:
    return GatewayMcpServer(
        "isp-gateway",
        version="1.0.0",
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
