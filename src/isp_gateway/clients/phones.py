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


# A phone a caller sends to be stored (CALLERS.md 2, client update): spaces, dashes, dots,
# parentheses and one leading `+` are dropped; 7 to 15 ASCII digits must remain. A letter
# or any other symbol refuses the whole value ("abc 300-123-45(67) xyz" is no phone).
_PHONE_DECORATION = re.compile(r"[\t-\r .()-]")
# A leading `00` is an international prefix the number loses when stored (normalize_phone):
# 7 digits must remain after it too ("00 123 45" is no phone).
_PHONE_DIGITS = re.compile(r"\+?(?!00[0-9]{0,6}$)[0-9]{7,15}")


def is_update_phone(raw: str) -> bool:
    return _PHONE_DIGITS.fullmatch(_PHONE_DECORATION.sub("", raw)) is not None


def replace_first_phone(
    field: str | None, number: str, country_code: str, national_length: int
) -> str:
    """The upstream `telefono` field with its first number replaced by `number`: the
    others stay after it in their order, each once (and never `number` again), joined by
    the field's own separator. ("3001112233,3114445566", 3209998877 →
    "3209998877,3114445566".) Parts that hold no number stay where they were."""
    if not field:
        return number
    parts = _field_parts(field)
    if not parts:
        return number
    separator = ","
    if len(parts) > 1:
        separator = field[parts[0][1] : parts[1][0]] or ","
    out: list[str] = []
    seen = {number}
    replaced = False
    for start, end in parts:
        part = field[start:end]
        digits = normalize_phone(part, country_code, national_length)
        if len(digits) < MIN_PHONE_DIGITS:
            out.append(part)
        elif not replaced:
            out.append(number)
            replaced = True
        elif digits not in seen:
            out.append(part)
        seen.add(digits)
    if not replaced:
        out.insert(0, number)
    return separator.join(out)


_COUNTRY_PREFIX = re.compile(r"\+?[0-9]{1,4}")


def _field_parts(field: str) -> list[tuple[int, int]]:
    """Where each of `split_phones`' parts is in `field`, a country code split off its
    number ("+57 3001112233") joined back to it."""
    spans: list[tuple[int, int]] = []
    position = 0
    for part in split_phones(field):
        start = field.index(part, position)
        position = start + len(part)
        if spans and _COUNTRY_PREFIX.fullmatch(field[spans[-1][0] : spans[-1][1]]):
            spans[-1] = (spans[-1][0], position)
        else:
            spans.append((start, position))
    return spans
