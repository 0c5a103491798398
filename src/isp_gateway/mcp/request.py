"""What the /mcp endpoint learnt about a request, handed to the tool handlers through the
ASGI scope (the SDK passes the scope on in its request context)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from isp_gateway.kit import deadline
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
