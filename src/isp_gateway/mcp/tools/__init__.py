"""The MCP tools (CALLERS.md 5), one module per family: customers.py (find, verify, and the
verified customer's summary, account, diagnosis, contact), money.py (payment promises),
tickets.py, outages.py (general outages), catalogue.py (plans, payment methods); base.py is
what a tool is made of.

Each tool calls the same service the REST router calls (services.py's `Services`), never a
router and never a copy of a rule. Order for an agent: find (service ids only), verify
(a `verification_id`), then act with that id; every tool after verification acts on the
service inside the id, never on one the agent names.

Before verification nothing that names, locates or prices a customer is returned, not even
in an error: find_customer answers service ids, verify_customer answers verified or not and
the attempts left (never which fields matched, never the record's values).

Adding a tool: write its function and its `ToolSpec` in its family's module (a new family:
a new module, and one line in `TOOLS` below); its scope (auth/keys.py), its sentences
(kit/messages) and a line in docs/agents.md's table. Nothing else lists tools.
"""

from __future__ import annotations

from isp_gateway.mcp.tools import catalogue, customers, money, outages, tickets
from isp_gateway.mcp.tools.base import (
    SAY_IT,
    Args,
    Call,
    Outcome,
    ToolFailure,
    ToolSpec,
    Verified,
)

TOOLS: tuple[ToolSpec, ...] = (
    *customers.TOOLS,
    *money.TOOLS,
    *tickets.TOOLS,
    *outages.TOOLS,
    *catalogue.TOOLS,
)
BY_NAME = {tool.name: tool for tool in TOOLS}
assert len(BY_NAME) == len(TOOLS), "two tools share a name"


async def target(tool: ToolSpec, call: Call, args: Args) -> int | None:
    """The service a call is about (the audit's, CALLERS.md 4 and 6): a verified tool's,
    from its verification id (VerificationRequired otherwise); the one verify_customer
    names; else None."""
    if tool.on_service is not None:
        assert isinstance(args, Verified)
        return await call.verifications.service_of(args.verification_id, call.caller)
    return args.service_id if isinstance(args, customers.VerifyArgs) else None


async def run(tool: ToolSpec, call: Call, args: Args, service_id: int | None) -> Outcome:
    """Run one tool, a verified one on `service_id` (its `target`); errors are the
    services' own (ServiceError)."""
    if tool.plain is not None:
        return await tool.plain(call, args)
    assert tool.on_service is not None and service_id is not None
    return await tool.on_service(call, service_id, args)


__all__ = [
    "BY_NAME",
    "SAY_IT",
    "TOOLS",
    "Call",
    "Outcome",
    "ToolFailure",
    "ToolSpec",
    "run",
    "target",
]
