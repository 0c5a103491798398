"""What every MCP tool is made of: its arguments, what one call works with, what it answers,
and its entry in the table (`ToolSpec`).

A result is a sentence for the customer (kit/messages, in MESSAGES_LANGUAGE, never naming a
tool or a field), the data, and, when the agent has a next step to take, an `agent_hint`:
English words for the model, which may name tools and must never be read out.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, field_validator
from pydantic_core import PydanticCustomError

if TYPE_CHECKING:
    from isp_gateway.kit.callers import Caller
    from isp_gateway.kit.verifications import Verifications
    from isp_gateway.services import Services
    from isp_gateway.settings import Settings

MAX_SERVICE_ID = 9_999_999_999  # at most 10 digits (CALLERS.md 2)

ORDER = (
    "Order: find_customer (service ids only) -> verify_customer (name, address and "
    "plan_name or plan_price, as the customer states them) -> the other tools with the "
    "verification_id it returns."
)
VERIFIED_ONLY = (
    "Needs the verification_id of a successful verify_customer by this same caller and end "
    "user; it acts only on the service that was verified."
)
SAY_IT = (
    "Each result's first text (and `message` in an error) is a sentence for the customer; "
    "`agent_hint`, when present, is for you only."
)


class ToolFailure(Exception):
    """A tool error an agent can read (isError: true): the code, the sentence for the
    customer, a hint for the agent and any data that names the cause."""

    def __init__(self, code: str, sentence: str, hint: str | None = None, **data: Any) -> None:
        super().__init__(sentence)
        self.code = code
        self.sentence = sentence
        self.hint = hint
        self.data = data


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
    # For the agent, never for the customer: the next step, in English, naming tools.
    hint: str | None = None


# -- arguments --------------------------------------------------------------------------


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean(cls, value: Any) -> Any:
        """No argument of any tool is a boolean: `true` is a wrong type, as in REST's strict
        bodies (kit/models.py), never service 1, a price of 1, invoice 1 or a 1 s wait
        (pydantic's lax mode would read it so, and a verification attempt was spent)."""
        if isinstance(value, bool):
            raise PydanticCustomError("bool_refused", "Input should not be a boolean")
        return value


def _as_text(value: Any) -> Any:
    """A document or a phone sent as a JSON number is its digits (issue 28.3): agents send
    `3001234567` as readily as `"3001234567"`. A boolean stays a wrong type."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return value


# A text field that also takes a JSON number (a phone, a document).
TextOrNumber = Annotated[
    str | None,
    BeforeValidator(_as_text),
    WithJsonSchema({"type": ["string", "integer"], "maxLength": 40}),
]
NUMBER_NOTE = "; text or a number (send text when it has leading zeros)"


class Verified(Args):
    # Required: every tool that acts on a customer needs it (issue 28.4). A call without one
    # is still answered `verification_required` (server.py), the guard's own refusal.
    verification_id: str = Field(
        max_length=200, description="The verification_id of a successful verify_customer"
    )


class NoArgs(Args):
    pass


# -- the table ----------------------------------------------------------------------------

Plain = Callable[[Call, Any], Awaitable[Outcome]]
OnService = Callable[[Call, int, Any], Awaitable[Outcome]]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool: its name, the API-key scope it needs, what the model reads about it, its
    arguments, and what it does: `plain` (no customer, or one it finds), or `on_service`
    (the verified customer's service, resolved from the verification id first)."""

    name: str
    scope: str
    description: str
    args: type[Args]
    read_only: bool
    plain: Plain | None = None
    on_service: OnService | None = None

    @property
    def verified(self) -> bool:
        return self.on_service is not None

    def input_schema(self) -> dict[str, Any]:
        return self.args.model_json_schema()


def verified_description(text: str) -> str:
    return f"{text} {VERIFIED_ONLY} {ORDER}"


def ids(values: list[int]) -> str:
    return ", ".join(str(v) for v in values)
