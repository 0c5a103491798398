"""Phone normalisation (DECISIONS.md, Clients): digits only, then drop a leading `00` and the
country code when what remains is longer than a national number."""

from __future__ import annotations

import re

MIN_PHONE_DIGITS = 7
# Several numbers in one upstream field: "3001234567,3109876543", "300.. / 310..", "300.. 310..".
_SEPARATORS = re.compile(r"[,;/]|\s{2,}|\s(?=\+?\d{7,})")
_NON_DIGIT = re.compile(r"\D")


def normalize_phone(raw: str, country_code: str, national_length: int) -> str:
    digits = _NON_DIGIT.sub("", raw)
    if digits.startswith("00"):
        digits = digits[2:]
    if len(digits) > national_length and digits.startswith(country_code):
        digits = digits[len(country_code) :]
    return digits


def split_phones(field: str | None) -> list[str]:
    """The numbers written in one upstream `telefono` field."""
    if not field:
        return []
    return [part.strip() for part in _SEPARATORS.split(field) if part and part.strip()]


def field_phones(field: str | None, country_code: str, national_length: int) -> list[str]:
    """Normalised numbers of an upstream field (too-short fragments dropped)."""
    if not field:
        return []
    if field.isdigit() and len(field) <= national_length + len(country_code):
        # The common case: one plain number.
        number = normalize_phone(field, country_code, national_length)
        return [number] if len(number) >= MIN_PHONE_DIGITS else []
    out: list[str] = []
    for part in split_phones(field):
        number = normalize_phone(part, country_code, national_length)
        if len(number) >= MIN_PHONE_DIGITS and number not in out:
            out.append(number)
    return out
