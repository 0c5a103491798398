"""Text forms shared by every comparison of people's words (names, subjects, plans, states)."""

from __future__ import annotations

import unicodedata


def strip_accents(text: str) -> str:
    """The text without its accents (José → Jose, Ñ → N); case and spacing unchanged."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def fold(text: str) -> str:
    """Case-, accent- and spacing-insensitive: "  Falla  de  Conexión" → "falla de conexion"."""
    return " ".join(strip_accents(text).casefold().split())
