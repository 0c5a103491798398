"""Request and response models of the money routes (MONEY.md), the report's multipart body
as the OpenAPI document declares it, and the check of its text fields."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field

from isp_gateway.accounts.schemas import ActivePromiseResponse
from isp_gateway.kit.models import RequestModel
from isp_gateway.payments.errors import (
    BROKEN_PROMISE,
    NOTHING_OWED,
    SERVICE_CANCELLED,
    TOO_MANY_PROMISES,
    TOO_MANY_REPORTS,
    InvalidField,
)
from isp_gateway.payments.receipt import RECEIPT

PROMISE_REASONS = (SERVICE_CANCELLED, NOTHING_OWED, BROKEN_PROMISE, TOO_MANY_PROMISES)
MAX_ID = 9_999_999_999  # at most 10 digits, as every id (CALLERS.md 2)
DAY_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_DAY = re.compile(DAY_PATTERN)


def _iso_day(value: Any) -> Any:
    """A JSON date is a "YYYY-MM-DD" string, nothing else (no timestamp, no time)."""
    if isinstance(value, str) and _DAY.fullmatch(value):
        try:
            return date.fromisoformat(value)
        except ValueError:
            raise ValueError("not a date") from None
    if isinstance(value, date):
        return value
    raise ValueError("must be a date as YYYY-MM-DD")


IsoDay = Annotated[date, BeforeValidator(_iso_day)]


class PromiseRequest(RequestModel):
    until: IsoDay = Field(
        description="The day the customer will have paid by (YYYY-MM-DD, in TIMEZONE): after "
        "today, at most PROMISE_MAX_DAYS (5) days ahead"
    )
    invoice_id: int | None = Field(
        default=None,
        ge=1,
        le=MAX_ID,
        description="A pending invoice of this service; default: the oldest pending one",
    )


class PromiseCreatedResponse(BaseModel):
    service_id: int
    invoice_id: int
    until: str = Field(description="YYYY-MM-DD")
    amount_due: float = Field(description="The total of the promised invoice")
    reconnected: Literal[True] = Field(description="The backend reactivates the service at once")


class PromiseRefusedResponse(BaseModel):
    """promise_not_allowed's data."""

    reason: str = Field(json_schema_extra={"enum": list(PROMISE_REASONS)})
    allowed_from: str | None = Field(
        default=None,
        description="broken_promise, too_many_promises: the first day a promise is allowed",
    )


class ReportReceivedResponse(BaseModel):
    service_id: int
    invoice_id: int
    reference: str
    status: Literal["in_review"] = Field(description="Staff review it in WispHub")


class ReportRefusedResponse(BaseModel):
    """payment_report_not_allowed's data."""

    reason: str = Field(json_schema_extra={"enum": [NOTHING_OWED, TOO_MANY_REPORTS]})
    allowed_from: str | None = Field(
        default=None, description="too_many_reports: the first day another is taken"
    )


# -- the report's multipart body ---------------------------------------------------------------

# A reference is 1-64 printable characters (MONEY.md 2), not all spaces: printable as
# Python's str.isprintable() says, so no control, format character (a zero-width space, a
# joiner, a BOM, a direction mark), separator other than the space (a no-break space, a
# thin space, a line separator), surrogate, private-use or unassigned code point. An
# invisible character would make one transfer two for the duplicate guard, and staff would
# review what they cannot see. The document's pattern names every one of them in the Basic
# Multilingual Plane that is assigned, in escapes ECMA-262 and Python read alike; the rest
# (unassigned code points, and a few above U+FFFF) no portable pattern can name, so the
# description says it in words and the check is str.isprintable() itself
# (tests/payments/test_reference.py holds the two together).
_NOT_PRINTABLE = (
    r"\x00-\x1f\x7f-\xa0\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u1680"
    r"\u180e\u2000-\u200f\u2028-\u202f\u205f-\u2064\u2066-\u206f\u3000\ud800-\uf8ff"
    r"\ufeff\ufff9-\ufffb"
)
REFERENCE_PATTERN = rf"^[^{_NOT_PRINTABLE}]*[^ {_NOT_PRINTABLE}][^{_NOT_PRINTABLE}]*$"
# A plain decimal with a dot, more than zero: "40000" or "40000.50". Never "40.000": in the
# customers' own writing that is forty thousand, as a number it would be forty.
AMOUNT_PATTERN = r"^(?!0+(\.0+)?$)[0-9]{1,12}(\.[0-9]{1,2})?$"
ID_PATTERN = r"^(?!0+$)[0-9]{1,10}$"
MAX_REFERENCE = 64

REPORT_FORM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": [RECEIPT, "reference", "paid_on", "payment_method_id", "amount"],
    "properties": {
        RECEIPT: {
            "type": "string",
            "format": "binary",
            "description": "The receipt: a JPEG, PNG, WEBP or PDF file (recognised by its "
            "content, not its name), at most RECEIPT_MAX_BYTES (5 MiB)",
        },
        "reference": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_REFERENCE,
            "pattern": REFERENCE_PATTERN,
            "description": "The bank's reference of the payment: 1-64 printable characters, "
            "not all spaces (printable as Python's str.isprintable(): no control or "
            "invisible character, no space but U+0020, no private-use or unassigned code "
            "point)",
        },
        "paid_on": {
            "type": "string",
            "format": "date",
            "pattern": DAY_PATTERN,
            "description": "The day it was paid: not ahead, at most 60 days back",
        },
        "payment_method_id": {
            "type": "string",
            "pattern": ID_PATTERN,
            "description": "One of GET /api/v1/payment-methods",
        },
        "amount": {
            "type": "string",
            "pattern": AMOUNT_PATTERN,
            "description": "What was paid: digits and an optional dot with 1-2 decimals "
            '("40000", "40000.50")',
        },
        "invoice_id": {
            "type": "string",
            "pattern": ID_PATTERN,
            "description": "A pending invoice of this service; default: the oldest pending one",
        },
    },
    "additionalProperties": False,
}
REPORT_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "multipart/form-data": {
            "schema": REPORT_FORM_SCHEMA,
            "encoding": {
                RECEIPT: {"contentType": "image/jpeg, image/png, image/webp, application/pdf"}
            },
        }
    },
}


def valid_reference(value: str) -> bool:
    """What REFERENCE_PATTERN and its description say: 1-64 printable characters, not all
    spaces (str.isprintable() admits no other space)."""
    return 0 < len(value) <= MAX_REFERENCE and value.isprintable() and value.strip(" ") != ""


_AMOUNT = re.compile(AMOUNT_PATTERN)
_ID = re.compile(ID_PATTERN)


@dataclass(frozen=True, slots=True)
class ReportFields:
    """A report's text fields, checked as the document declares them."""

    reference: str
    paid_on: date
    payment_method_id: int
    amount: float
    invoice_id: int | None

    @classmethod
    def of(cls, fields: dict[str, str]) -> ReportFields:
        """The fields, or 422 `validation_error` naming the first one that is missing or
        not as documented."""

        def text(name: str, valid: Callable[[str], object], problem: str) -> str:
            value = fields.get(name)
            if value is None:
                raise InvalidField(name, "required", "report_missing")
            if not valid(value):
                raise InvalidField(name, problem, "report_invalid")
            return value

        reference = text("reference", valid_reference, f"1-{MAX_REFERENCE} printable characters")
        day = text("paid_on", _DAY.fullmatch, "a date as YYYY-MM-DD")
        try:
            paid_on = date.fromisoformat(day)
        except ValueError:
            raise InvalidField("paid_on", "not a date", "report_invalid") from None
        method = text("payment_method_id", _ID.fullmatch, "a positive integer")
        amount = text("amount", _AMOUNT.fullmatch, 'a decimal with a dot, more than 0 ("40000.50")')
        invoice = fields.get("invoice_id")
        if invoice is not None:
            invoice = text("invoice_id", _ID.fullmatch, "a positive integer")
        return cls(
            reference=reference.strip(),
            paid_on=paid_on,
            payment_method_id=int(method),
            amount=float(amount),
            invoice_id=None if invoice is None else int(invoice),
        )


__all__ = [
    "ActivePromiseResponse",
    "PromiseCreatedResponse",
    "PromiseRefusedResponse",
    "PromiseRequest",
    "ReportFields",
    "ReportReceivedResponse",
    "ReportRefusedResponse",
]
