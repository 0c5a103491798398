"""What every MCP tool is made of (CALLERS.md 5): its arguments' base, what a call works
with, what it answers, how it fails, and its entry in the table (tools.py, money.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from isp_gateway.kit.callers import Caller
    from isp_gateway.kit.verifications import Verifications
    from isp_gateway.services import Services
    from isp_gateway.settings import Settings

ORDER = (
    "Order: find_customer (service ids only) -> verify_customer (name, address and "
    "plan_name or plan_price, as the customer states them) -> the other tools with the "
    "verification_id it returns."
)
VERIFIED_ONLY = (
    "Needs the verification_id of a successful verify_customer by this same caller and end "
    "user; it acts only on the service that was verified."
)


class ToolFailure(Exception):
    """A tool error an agent can read (isError: true): a short Spanish sentence and a code."""

    def __init__(self, code: str, sentence: str) -> None:
        super().__init__(sentence)
        self.code = code
        self.sentence = sentence


@dataclass(frozen=True, slots=True)
class Call:
    """What one tool call works with."""

    services: Services
    verifications: Verifications
    settings: Settings
    caller: Caller


@dataclass(frozen=True, slots=True)
class Outcome:
    data: dict[str, Any]
    sentence: str


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class Verified(Args):
    # Optional in the schema so that a call without one is told to verify first (the
    # guard's answer), not only that an argument is missing.
    verification_id: str | None = Field(
        default=None, max_length=200, description="From a successful verify_customer"
    )


Plain = Callable[[Call, BaseModel], Awaitable[Outcome]]
OnService = Callable[[Call, int], Awaitable[Outcome]]
OnServiceArgs = Callable[[Call, int, BaseModel], Awaitable[Outcome]]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    scope: str
    description: str
    args: type[Args]
    read_only: bool
    # Exactly one of these: a tool on no service, on the verified service, or on the
    # verified service with more arguments.
    plain: Plain | None = None
    on_service: OnService | None = None
    on_service_args: OnServiceArgs | None = None

    def input_schema(self) -> dict[str, Any]:
        return self.args.model_json_schema()


def verified(text: str) -> str:
    """A verified tool's description: what it does, the guard and the order."""
    return f"{text} {VERIFIED_ONLY} {ORDER}"
