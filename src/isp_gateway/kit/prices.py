"""The one reader of a price written by a person or a backend: `65000`, `65.000`, `65,000`,
`$65.000`, `$ 65 000`, `65000.00`, `65.000,50`, `65,000.50`.

Colombians write sixty-five thousand pesos `65.000` (a dot between thousands), software
writes `65000.00`, and both reach the gateway: from the customer through an agent
(`verify_customer`'s `plan_price`), from a bot (REST verify's `internet_plan_price`) and from
the backend's plan sheets. How `65.000` is told from `65.50` (docs/agents.md, "Prices"):

- a separator followed by exactly three digits groups thousands (`65.000`, `65,000`,
  `1.234.567`, `65 000`): the groups are 1 to 3 digits, then 3 digits each, one separator
  kind throughout;
- a separator followed by one or two digits at the end is the decimal mark (`65.50`,
  `40000,5`); after grouped thousands it is the other kind (`65.000,50`, `65,000.50`);
- nothing else is a price (three decimals, mixed groupings, words, signs): the caller is told
  so rather than matched against a guess.

A JSON number is read as the number it is (`65.000` sent as a number *is* 65: JSON does not
keep the zeros); send the text, or 65000.
"""

from __future__ import annotations

import math
import re

_S = r"[\t-\r ]*"
_PLAIN = r"[0-9]+(?:[.,][0-9]{1,2})?"
_DOT_GROUPS = r"[0-9]{1,3}(?:\.[0-9]{3})+(?:,[0-9]{1,2})?"
_COMMA_GROUPS = r"[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]{1,2})?"
_SPACE_GROUPS = r"[0-9]{1,3}(?: [0-9]{3})+(?:[.,][0-9]{1,2})?"
# The accepted texts, in a form every regex dialect reads alike (JSON Schema's, Python's):
# the OpenAPI document and the MCP tool schema carry it as the string's `pattern`.
PRICE_PATTERN = rf"^{_S}(?:\${_S})?(?:{_PLAIN}|{_DOT_GROUPS}|{_COMMA_GROUPS}|{_SPACE_GROUPS}){_S}$"
_PRICE = re.compile(PRICE_PATTERN)
_DOTS = re.compile(_DOT_GROUPS)
_COMMAS = re.compile(_COMMA_GROUPS)
_SPACES = re.compile(_SPACE_GROUPS)

# For descriptions and error messages.
FORMATS = "65000, 65.000, 65,000, $65.000, 65000.00 or 65.000,50"


def read_price(value: object) -> float | None:
    """The amount a price text or number stands for; None when it is no price (blank,
    words, a boolean, NaN, three decimals...)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
        return number if math.isfinite(number) else None
    if not isinstance(value, str) or _PRICE.fullmatch(value) is None:
        return None
    text = value.strip().removeprefix("$").strip()
    if _DOTS.fullmatch(text):
        text = text.replace(".", "").replace(",", ".")
    elif _COMMAS.fullmatch(text):
        text = text.replace(",", "")
    elif _SPACES.fullmatch(text):
        text = text.replace(" ", "").replace(",", ".")
    else:
        text = text.replace(",", ".")
    number = float(text)
    # Four hundred nines are a price text, not an amount.
    return number if math.isfinite(number) else None
