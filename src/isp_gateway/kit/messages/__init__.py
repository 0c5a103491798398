"""The message catalogue: every text the API answers, keyed by action, in Spanish and English.

Keyed by `Action` (kit/actions.py), so an action is written once and its texts once. Each
action has its **sentence** (variant `""`): what a bot may say to the customer as it is, so
it never names a tool, a field of the API or a customer's data; the MCP tools answer with it.
An action may have **variants** for one case of it (`(Action.TICKET_CREATION_FAILED,
"no_technician")`), with `{placeholders}` for its figures (the zone cap's counts). REST's
`message` and the MCP tools' sentences are read from here, never written in a service.

Language (docs/api.md, "Messages and their language"): Spanish unless the deployment sets
`MESSAGES_LANGUAGE=en`. Texts the spec quotes ('Client not found', 'Invalid document format',
'Failed to retrieve clients', 'Unable to fetch client data', the 'q' is required message)
and the verify messages it says are Spanish are **pinned**: the same in both languages, as
the spec gives them, since a client may compare them. The language of the request being
served is a context variable set at the edge (web/middleware.py) from the app's settings,
so two apps in one process answer each in its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from datetime import date
from types import MappingProxyType
from typing import Any

from isp_gateway.kit.actions import Action
from isp_gateway.kit.messages import clients, general, network, outages, payments, tickets
from isp_gateway.kit.messages.texts import Language, Text, Texts


def _merged(*areas: Texts) -> Texts:
    """The areas' texts in one table; an area may add variants to another's action (money's
    form refusals to `validation_error`), never write one twice."""
    merged: Texts = {}
    for area in areas:
        for action, texts in area.items():
            known = merged.setdefault(action, {})
            twice = set(known) & set(texts)
            assert not twice, f"{action}: {sorted(twice)} written twice"
            known.update(texts)
    return merged


_CATALOGUE = _merged(
    general.TEXTS, clients.TEXTS, tickets.TEXTS, network.TEXTS, payments.TEXTS, outages.TEXTS
)

CATALOGUE: Mapping[Action, Mapping[str, Text]] = MappingProxyType(
    {action: MappingProxyType(texts) for action, texts in _CATALOGUE.items()}
)

_language: ContextVar[Language] = ContextVar("isp_gateway_language", default=Language.ES)


def use_language(language: Language | str) -> None:
    """The language of the texts of the request being served (set at the edge)."""
    _language.set(Language(language))


def current_language() -> Language:
    return _language.get()


def text(action: str, variant: str = "", *, language: Language, **params: Any) -> str:
    """The text of (`action`, `variant`) in `language`, its placeholders filled."""
    entry = CATALOGUE[Action(action)][variant]
    return entry.get(language).format(**params)


def say(action: str, variant: str = "", **params: Any) -> str:
    """The text of (`action`, `variant`) in the language of the request being served."""
    return text(action, variant, language=_language.get(), **params)


def amount(value: float) -> str:
    """A sum of money as the language writes it: `65.000` (Spanish) or `65,000` (English),
    with cents only when it has some."""
    whole = float(value).is_integer()
    written = f"{value:,.0f}" if whole else f"{value:,.2f}"
    if _language.get() == Language.ES:
        written = written.translate(str.maketrans(",.", ".,"))
    return "$" + written


_MONTHS = {
    Language.ES: (
        "enero", "febrero", "marzo", "abril", "mayo", "junio", "julio", "agosto",
        "septiembre", "octubre", "noviembre", "diciembre",
    ),
    Language.EN: (
        "January", "February", "March", "April", "May", "June", "July", "August",
        "September", "October", "November", "December",
    ),
}  # fmt: skip


def day(value: date, today: date) -> str:
    """A day as the language says it: `28 de noviembre` (Spanish) or `November 28`
    (English), with the year when it is not `today`'s."""
    language = _language.get()
    month = _MONTHS[language][value.month - 1]
    if language == Language.ES:
        written = f"{value.day} de {month}"
        return written if value.year == today.year else f"{written} de {value.year}"
    written = f"{month} {value.day}"
    return written if value.year == today.year else f"{written}, {value.year}"


def is_technical(action: str, variant: str) -> bool:
    try:
        return CATALOGUE[Action(action)][variant].technical
    except (KeyError, ValueError):
        return True


def is_pinned(action: str, variant: str) -> bool:
    """Whether the text is one the spec quotes for REST, the same in both languages."""
    try:
        return CATALOGUE[Action(action)][variant].pinned
    except (KeyError, ValueError):
        return False


def sentence(action: str, default: str) -> str:
    """The customer sentence of `action`, or `default` for a code that is no action."""
    try:
        return say(Action(action))
    except ValueError:
        return default


__all__ = [
    "CATALOGUE",
    "Language",
    "Text",
    "amount",
    "current_language",
    "day",
    "is_pinned",
    "is_technical",
    "say",
    "sentence",
    "text",
    "use_language",
]
