"""Request and response models of the client endpoints (OpenAPI and validation)."""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, JsonValue, WithJsonSchema

from isp_gateway.kit.models import NON_BLANK, RequestModel
from isp_gateway.kit.prices import FORMATS, PRICE_PATTERN, read_price

# Patterns of the OpenAPI document; each accepts only what the service accepts (whitespace
# is ASCII `[\t-\r ]` so every regex dialect reads the pattern the same way).
# DECISIONS.md: after trimming, 3 to 20 ASCII letters or digits.
DOCUMENT_PATTERN = r"^[\t-\r ]*[A-Za-z0-9]{3,20}[\t-\r ]*$"
# At least 7 digits, the first not 0 (a leading `00` is dropped as an international prefix),
# with spaces, `+`, `(`, `)`, `.` or `-` anywhere between.
_PHONE_SEP = r"[\t-\r +().-]"
PHONE_PATTERN = rf"^{_PHONE_SEP}*[1-9](?:{_PHONE_SEP}*[0-9]){{6,}}{_PHONE_SEP}*$"
# A phone to store (CALLERS.md 2): 7 to 15 digits, with spaces, dashes, dots, parentheses
# and one leading `+` around them (clients/phones.py `is_update_phone`).
_UPDATE_SEP = r"[\t-\r .()-]"
# A leading `00` (an international prefix, dropped when stored) must leave 7 digits after it:
# three alternatives by the first two digits, without a lookahead (the fuzzer's generator
# cannot build strings for one and would filter most of them out).
_D = rf"[0-9]{_UPDATE_SEP}*"
UPDATE_PHONE_PATTERN = (
    rf"^{_UPDATE_SEP}*(?:\+{_UPDATE_SEP}*)?(?:[1-9]{_UPDATE_SEP}*(?:{_D}){{6,14}}"
    rf"|0{_UPDATE_SEP}*[1-9]{_UPDATE_SEP}*(?:{_D}){{5,13}}"
    rf"|0{_UPDATE_SEP}*0{_UPDATE_SEP}*(?:{_D}){{7,13}})$"
)
_BLANK = r"^[\t-\r ]*$"


class ClientResponse(BaseModel):
    """Spec 2.2: `service_id` is always an integer, every other field may be null."""

    service_id: int
    name: str | None = None
    document: str | None = None
    phone: str | None = None
    address: str | None = None
    city: str | None = None
    locality: str | None = None
    payment_status: str | None = None
    zone_id: int | None = None
    antenna_ip: str | None = None
    cut_off_date: str | None = Field(default=None, description="YYYY-MM-DD")
    outstanding_balance: float | None = None
    lan_interface: str | None = None
    internet_plan_name: str | None = None
    internet_plan_price: float | None = None
    technician_id: int | None = None
    service_state: str | None = Field(
        default=None,
        description="Beyond the spec: active, suspended, cancelled, free or unknown (`estado`)",
    )


VERIFY_FIELDS = ("name", "address", "internet_plan_name", "internet_plan_price")


PRICE_TEXT: dict[str, JsonValue] = {"type": "string", "pattern": PRICE_PATTERN}


def _present(name: str) -> JsonValue:
    """A field that counts: a number or a price text, or a string that is not blank."""
    if name == "internet_plan_price":
        return {"anyOf": [{"type": "number"}, PRICE_TEXT]}
    return {"type": "string", "pattern": NON_BLANK}


def _price(value: Any) -> Any:
    """A price text read by the one reader (kit/prices.py); a blank one counts as absent.
    Anything else goes on to the strict number check (a boolean stays a wrong type)."""
    if not isinstance(value, str):
        return value
    if not value.strip():
        return None
    price = read_price(value)
    if price is None:
        raise ValueError(f"not a price: write it like {FORMATS}")
    return price


# A number, or a price as people write it ("65.000" is sixty-five thousand).
Price = Annotated[
    float | None,
    BeforeValidator(_price),
    WithJsonSchema(
        {
            "anyOf": [{"type": "number"}, PRICE_TEXT, {"type": "null"}],
            "description": f"A number, or a price text: {FORMATS} (a dot or comma before "
            "exactly three digits groups thousands; before one or two, decimals)",
        }
    ),
]


def _at_least(count: int, names: tuple[str, ...]) -> list[JsonValue]:
    """JSON Schema for "at least `count` of `names` present (not null, not blank)"."""
    return [
        {"required": list(chosen), "properties": {n: _present(n) for n in chosen}}
        for chosen in combinations(names, count)
    ]


class VerifyRequest(RequestModel):
    """At least 3 of the 4 fields; null or blank values do not count (400 otherwise)."""

    # The combinations under `allOf`, not beside the properties: a client generator then
    # makes one `VerifyRequest` class with the four fields, not one class per combination;
    # a validator (the fuzzer's) still reads "at least 3 of 4" from it.
    model_config = ConfigDict(json_schema_extra={"allOf": [{"anyOf": _at_least(3, VERIFY_FIELDS)}]})

    name: str | None = None
    address: str | None = None
    internet_plan_name: str | None = None
    internet_plan_price: Price = None


class VerificationDebug(BaseModel):
    client_address: str | None = None
    client_plan_name: str | None = None
    resolved_plan_price: float | None = None


class VerificationResult(BaseModel):
    is_valid: bool
    matched_fields: list[str]
    debug: VerificationDebug | None = Field(
        default=None,
        description="IDENTITY_POLICY=spec, on a mismatch only: the record's address, plan "
        "and price (spec 2.5). Never under strict.",
    )
    verification_id: str | None = Field(
        default=None,
        description="On a success, whatever the policy: send it as X-Verification-Id "
        "(CALLERS.md 5) to the routes that need one.",
    )
    attempts_left: int | None = Field(
        default=None,
        description="IDENTITY_POLICY=strict, on a mismatch: attempts left before a lock.",
    )


class ResolvedIdentity(BaseModel):
    """A strict resolve's match (CALLERS.md 6): never the record, only what identifies the
    service and the verification to read it with."""

    service_ids: list[int] = Field(description="The service the facts verified")
    verification_id: str = Field(description="Send it as X-Verification-Id")


def _string_pattern(pattern: str) -> Callable[[dict[str, Any]], None]:
    """The pattern of an optional string field, set on its string branch of `anyOf` (beside
    the `anyOf` a generator draws values of any type and throws nearly all of them away)."""

    def extra(schema: dict[str, Any]) -> None:
        for branch in schema.get("anyOf", []):
            if isinstance(branch, dict) and branch.get("type") == "string":
                branch["pattern"] = pattern

    return extra


class UpdateClientRequest(RequestModel):
    """At least one of the two, not null and not blank; a blank one is left unchanged."""

    # Under `allOf`, as VerifyRequest's: one class in a generated client.
    model_config = ConfigDict(
        json_schema_extra={
            "allOf": [
                {
                    "anyOf": [
                        {
                            "required": [name],
                            "properties": {name: {"type": "string", "pattern": NON_BLANK}},
                        }
                        for name in ("document", "phone")
                    ]
                }
            ]
        }
    )

    document: str | None = Field(
        default=None,
        description="3 to 20 ASCII letters or digits (surrounding spaces are ignored)",
        json_schema_extra=_string_pattern(f"{_BLANK}|{DOCUMENT_PATTERN}"),
    )
    phone: str | None = Field(
        default=None,
        description="7 to 15 digits; spaces, dashes, dots, parentheses and one leading + are "
        "ignored, anything else is refused (400 invalid_phone). It replaces the record's first "
        "number; the others stay",
        json_schema_extra=_string_pattern(f"{_BLANK}|{UPDATE_PHONE_PATTERN}"),
    )
