"""What an audit event may hold (CALLERS.md 4): small details that never name, locate or
identify a customer, nor carry a secret.

`mask_details` keeps documents and phones as `***` and their last two digits and refuses a
name, an address, a password or a key outright (`AuditDetailRefused`, a programming error
of the code that records the event, raised so a test catches it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# Details: at most this many entries, strings cut to this length, lists to this many items.
MAX_DETAILS = 12
MAX_TEXT = 200
MAX_ITEMS = 20

# Words that, in a detail's key, mean its value is a document or a phone: kept as "***" and
# its last two digits.
MASKED_WORDS = frozenset(
    {
        "document",
        "documents",
        "documento",
        "doc",
        "cedula",
        "identificacion",
        "nit",
        "phone",
        "phones",
        "telefono",
        "tel",
        "celular",
        "movil",
        "mobile",
        "whatsapp",
        # A payment's bank reference (MONEY.md 2: masked like a document).
        "reference",
        "referencia",
    }
)
# Words that may never name a detail: a person's name or address, a password, a key or token.
REFUSED_WORDS = frozenset(
    {
        "name",
        "names",
        "fullname",
        "nombre",
        "nombres",
        "apellido",
        "apellidos",
        "address",
        "direccion",
        "password",
        "passwd",
        "pwd",
        "contrasena",
        "clave",
        "secret",
        "key",
        "apikey",
        "token",
        "authorization",
        "credentials",
    }
)
_WORDS = re.compile(r"[a-z0-9]+")
# Six or more digits, maybe with spaces, dots, dashes or parentheses between (a phone).
_DIGIT_RUN = re.compile(r"\d(?:[\s().-]*\d){5,}")
_SERVICE_ID = re.compile(r"[0-9]{1,10}")


class AuditDetailRefused(ValueError):
    """A detail would put a name, address, password or key in the audit. A bug in the
    caller of `record`, raised so a test catches it; the message names the detail's key
    only, never its value."""


def mask_digits(value: object) -> str:
    """A document or phone as `***` and its last two digits (`***` alone when it has fewer
    than two digits)."""
    digits = re.sub(r"\D", "", str(value))
    return "***" + digits[-2:] if len(digits) >= 2 else "***"


def _words(key: str) -> list[str]:
    return _WORDS.findall(key.lower().replace("ó", "o").replace("ñ", "n"))


def _refused(words: list[str]) -> bool:
    return "".join(words) in REFUSED_WORDS or any(word in REFUSED_WORDS for word in words)


def _masked(words: list[str]) -> bool:
    return "".join(words) in MASKED_WORDS or any(word in MASKED_WORDS for word in words)


def _scalar(value: object) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    text = str(value)[: MAX_TEXT * 4]
    if "igw_" in text:
        raise AuditDetailRefused("an API key in a detail value")
    # Any other long run of digits (a document or phone under another name) is masked too.
    text = _DIGIT_RUN.sub(lambda m: mask_digits(m.group()), text)
    return text[:MAX_TEXT]


def mask_details(details: Mapping[str, Any] | None) -> dict[str, Any]:
    """Details as the audit keeps them: documents and phones masked, long digit runs
    masked, texts and lists cut short. Raises AuditDetailRefused for a name, address,
    password or key (by the detail's key), a nested object, or too many entries."""
    if not details:
        return {}
    if len(details) > MAX_DETAILS:
        raise AuditDetailRefused(f"more than {MAX_DETAILS} details")
    out: dict[str, Any] = {}
    for key, value in details.items():
        if not isinstance(key, str) or not key:
            raise AuditDetailRefused("a detail without a text key")
        words = _words(key)
        if _refused(words):
            raise AuditDetailRefused(f"the detail {key!r} may not be audited")
        if isinstance(value, Mapping):
            raise AuditDetailRefused(f"the detail {key!r} is an object; keep details flat")
        many = isinstance(value, list | tuple | set | frozenset)
        items = list(value)[:MAX_ITEMS] if many else [value]
        if any(isinstance(item, Mapping | list | tuple | set | frozenset) for item in items):
            raise AuditDetailRefused(f"the detail {key!r} nests; keep details flat")
        if _masked(words):
            kept = [None if item is None else mask_digits(item) for item in items]
        else:
            kept = [_scalar(item) for item in items]
        out[key] = kept if many else kept[0]
    return out


def service_id_value(value: int | str | None) -> int | str | None:
    """A service id as the audit keeps it: an integer when it is one, else masked text."""
    if value is None or isinstance(value, int):
        return value
    text = str(value)
    return int(text) if _SERVICE_ID.fullmatch(text) else _scalar(text)
