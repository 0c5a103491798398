"""The server's instructions, written for what the caller's key can do (issue 28.1): an
agent whose key cannot find customers is not told "Always: 1) find_customer", but which
tools it lacks and the scope each needs.

Stateless: every /mcp request authenticates its caller (server.py) and the SDK builds the
`initialize` (or `server/discover`) answer in that request's context, where
`current_scopes` is read."""

from __future__ import annotations

from isp_gateway.kit.prices import FORMATS
from isp_gateway.mcp.auth import allows
from isp_gateway.mcp.request import current_scopes, use_scopes
from isp_gateway.mcp.tools import SAY_IT, TOOLS, ToolSpec

INTRO = "Tools of an internet service provider's support desk."
FIND = (
    "{n}) find_customer by the phone, document or service number the customer gives (it "
    "returns service ids only; several when the customer has several services: ask which)."
)
NO_FIND = (
    "{n}) This key cannot look customers up (find_customer needs the scope clients:read): "
    "ask the customer for their service number."
)
VERIFY = (
    "{n}) verify_customer with the name, the address and the plan name or price exactly as "
    f"the customer states them (a price as they write it: {FORMATS})."
)
NO_VERIFY = (
    "{n}) This key cannot verify customers (verify_customer needs the scope clients:verify), "
    "so no tool that acts on a customer can be used."
)
ACT = "{n}) Act with the verification_id it returns: {tools}."
NEVER = "Never ask the tools for data of a customer who did not verify."


def instructions_for(scopes: frozenset[str]) -> str:
    usable = [tool for tool in TOOLS if allows(scopes, tool.scope)]
    names = {tool.name for tool in usable}
    can_verify = "verify_customer" in names
    steps = [
        (FIND if "find_customer" in names else NO_FIND).format(n=1),
        (VERIFY if can_verify else NO_VERIFY).format(n=2),
    ]
    acting = [tool.name for tool in usable if tool.verified]
    if can_verify and acting:
        steps.append(ACT.format(n=3, tools=", ".join(acting)))
    parts = [INTRO, "Always: " + " ".join(steps), NEVER]
    steps_tools = {"find_customer", "verify_customer"}
    catalogue = [t.name for t in usable if not t.verified and t.name not in steps_tools]
    if catalogue:
        parts.append("Without verification: " + ", ".join(catalogue) + ".")
    missing = [tool for tool in TOOLS if tool.name not in names]
    if missing:
        parts.append("Not available to this key: " + "; ".join(_lacks(t) for t in missing) + ".")
    parts.append(SAY_IT)
    return " ".join(parts)


def _lacks(tool: ToolSpec) -> str:
    return f"{tool.name} (needs {tool.scope})"


__all__ = ["current_scopes", "instructions_for", "use_scopes"]
