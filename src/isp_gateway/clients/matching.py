"""Text folding and the "normalized partial match" of verify/resolve (DECISIONS.md, Clients).

A provided value matches when it has at least one token and every one of its tokens equals a
whole token of the record value, after folding case, accents and punctuation. So `Juan Perez`
matches `JUAN CARLOS PÉREZ GÓMEZ`, while `a` or `Jua` match nothing: a guess of a fragment
must never pass as an identity check.
"""

from __future__ import annotations

import re
from functools import lru_cache

from isp_gateway.kit.text import strip_accents

_WORD = re.compile(r"[^\W_]+")
# Address prefixes stripped on both sides ("V/", "VDA/", "VEREDA", "BARRIO", "B/", "VDA",
# "B."): after punctuation folding they are these leading tokens.
ADDRESS_PREFIXES = frozenset({"v", "vda", "vereda", "barrio", "b"})
PRICE_TOLERANCE = 1.0


@lru_cache(maxsize=65536)
def fold_word(word: str) -> str:
    """Lowercase, accents removed (José → jose). Words repeat a lot, hence the cache."""
    word = word.lower()
    if word.isascii():
        return word
    return strip_accents(word)


@lru_cache(maxsize=1)
def _fold_table() -> dict[int, str]:
    """Accented Latin letters (U+00C0-U+024F) → their base letters, for str.translate."""
    table: dict[int, str] = {}
    for code in range(0xC0, 0x250):
        base = fold_word(chr(code))
        if base != chr(code) and base.isascii():
            table[code] = base
    return table


def tokens(text: str | None) -> list[str]:
    """Folded alphanumeric tokens of a text; punctuation separates tokens."""
    if not text:
        return []
    lowered = text.lower()
    if not lowered.isascii():
        lowered = lowered.translate(_fold_table())
        if not lowered.isascii():
            lowered = fold_word(lowered)  # rarer scripts and symbols: full NFKD
    return _WORD.findall(lowered)


def strip_address_prefixes(parts: list[str]) -> list[str]:
    start = 0
    while start < len(parts) and parts[start] in ADDRESS_PREFIXES:
        start += 1
    return parts[start:] if start else parts


def address_tokens(text: str | None) -> list[str]:
    return strip_address_prefixes(tokens(text))


def text_matches(given: str | None, actual: str | None, *, address: bool = False) -> bool:
    split = address_tokens if address else tokens
    wanted = split(given)
    if not wanted:
        return False
    have = set(split(actual))
    return all(token in have for token in wanted)


def price_matches(given: float | None, actual: float | None) -> bool:
    if given is None or actual is None:
        return False
    return abs(given - actual) <= PRICE_TOLERANCE
