"""A text of the catalogue and its two languages (kit/messages)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from isp_gateway.kit.actions import Action


class Language(StrEnum):
    ES = "es"
    EN = "en"


@dataclass(frozen=True, slots=True)
class Text:
    es: str
    en: str
    # Quoted by the spec (or its language fixed by it): the same in both languages.
    pinned: bool = False
    # For a developer: may name a field, a header or a path (REST's detail). The customer
    # sentence of an MCP result is never a technical text.
    technical: bool = False

    def get(self, language: Language) -> str:
        return self.en if language == Language.EN else self.es


def t(es: str, en: str, *, technical: bool = False) -> Text:
    return Text(es, en, technical=technical)


def pinned(text: str, *, technical: bool = False) -> Text:
    return Text(text, text, pinned=True, technical=technical)


# The texts of some actions (one module per area), merged by the package into one catalogue.
Texts = dict[Action, dict[str, Text]]

UNAVAILABLE = t(
    "El sistema del proveedor no responde ahora; intente de nuevo en un momento.",
    "The provider's system is not answering right now; please try again in a moment.",
)
