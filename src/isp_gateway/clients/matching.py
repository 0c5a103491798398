"""Text folding and the "normalized partial match" of verify/resolve (DECISIONS.md, Clients).

A provided value matches when it has at least one token and every one of its tokens equals a
whole token of the record value, after folding case, accents and punctuation. So `Juan Perez`
matches `JUAN CARLOS PÉREZ GÓMEZ`, while `a` or `Jua` match nothing: a guess of a fragment
must never pass as an identity check.

Under the `strict` policy (CALLERS.md 6) a name or an address is known only when the words
given also say who or where (`fact_known`): `el`, `casa` or `2` are words of half the
addresses, and a first name is shared by many; a stranger typing them must not pass.
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

# Words that say nothing of who or where: Spanish articles, prepositions and conjunctions
# (folded). `el` or `la` is a word of a fifth of the addresses.
FILLER = frozenset(
    {"a", "al", "de", "del", "e", "el", "en", "la", "las", "lo", "los", "o", "u", "y"}
)
# Words of the kind of place, not of which place: the street types and their abbreviations,
# the parts of a plot or a building, the numbering words, the cardinal points, the saints and
# villas that begin many names of places. `casa` or `sector` is a word of a fifth of them.
ADDRESS_GENERIC = frozenset({
    "ap", "apartamento", "apto", "autopista", "av", "avenida", "b", "barrio", "bl", "bloque",
    "calle", "carrera", "cl", "cll", "conjunto", "cr", "cra", "cs", "casa", "dg", "diagonal",
    "edif", "edificio", "este", "etapa", "finca", "int", "interior", "km", "kilometro", "kr",
    "kra", "local", "lote", "lt", "manzana", "mz", "mza", "n", "no", "norte", "nro", "numero",
    "occidente", "oeste", "oriente", "piso", "san", "santa", "santo", "sector", "sur", "torre",
    "transversal", "tv", "urb", "urbanizacion", "v", "vda", "vereda", "via", "villa",
})  # fmt: skip


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


def _numeric(token: str) -> bool:
    """A house or street number (`4`, `45a`, `12`): one of few values, guessed in a few tries."""
    return any(char.isdigit() for char in token)


def fact_known(given: str | None, actual: str | None, *, address: bool = False) -> bool:
    """Under `strict`: `given` matches `actual` (text_matches) and says who or where.

    A name must give at least two of the record's words that are not filler (every one, when
    it has fewer): `Juan Pérez` for `JUAN CARLOS PÉREZ GÓMEZ`, never `Juan` alone. An address
    must give one of its words that names the place (not filler, not a generic word, not a
    number): `el rosal` for `VDA/ EL ROSAL CASA 4`, never `el`, `casa 4` or `4`; an address made
    of a street type and numbers only (`CALLE 45 # 12-30`) needs two of its numbers. A record
    value with nothing of the kind cannot be known by it."""
    if not text_matches(given, actual, address=address):
        return False
    split = address_tokens if address else tokens
    said = set(split(given))
    have = {token for token in split(actual) if token not in FILLER}
    if not address:
        return len(said & have) >= min(2, len(have)) > 0
    have -= ADDRESS_GENERIC
    places = {token for token in have if not _numeric(token)}
    if places:
        return bool(said & places)
    return len(said & have) >= min(2, len(have)) > 0
