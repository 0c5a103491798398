"""What the /mcp endpoint learnt about a request, handed to the tool handlers through the
ASGI scope (the SDK passes the scope on in its request context)."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from isp_gateway.kit import deadline, messages
from isp_gateway.kit.callers import Caller

if TYPE_CHECKING:
    from isp_gateway.services import Runtime

SCOPE_KEY = "isp_gateway.mcp"


@dataclass(frozen=True, slots=True)
class McpRequest:
    """What the endpoint learnt about one /mcp request, for the handlers."""

    caller: Caller
    scopes: frozenset[str]
    runtime: Runtime
    # The request's deadline, started at the edge (web/middleware.py), for the tool call.
    deadline: deadline.Deadline | None = None
    # MESSAGES_LANGUAGE: the language of the sentences.
    language: messages.Language = messages.Language.ES


# The scopes of the caller being served: the SDK builds its `initialize` answer (the
# per-key instructions, instructions.py) in the request's context, where they are read.
_scopes: ContextVar[frozenset[str]] = ContextVar("isp_gateway_mcp_scopes", default=frozenset())


def use_scopes(scopes: frozenset[str]) -> None:
    _scopes.set(scopes)


def current_scopes() -> frozenset[str]:
    return _scopes.get()
