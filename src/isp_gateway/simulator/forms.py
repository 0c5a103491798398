"""How the upstream's serializers (Django REST framework) read a write's fields, in its
words: shared by the simulator's writes (tickets, clients, promises, reports)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FieldErrors = dict[str, list[str]]

REQUIRED = "Este campo es requerido."
BLANK = "Este campo no puede estar en blanco."
NOT_INT = "Se requiere un número entero válido."


def unknown_pk(value: Any) -> str:
    return f'Clave primaria "{value}" inválida - objeto no existe.'


def not_a_choice(value: Any) -> str:
    return f'"{value}" no es una elección válida.'


def as_int(value: Any) -> int | None:
    """An integer field as DRF reads it (a number or a string of digits), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


class Form:
    """A write's fields read one by one, each refusal kept in `errors` under its field."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.data = data
        self.errors: FieldErrors = {}

    def text(self, name: str) -> str | None:
        """A required text field, stripped; None when it is missing or blank."""
        value = self.data.get(name)
        if value is None:
            self.errors[name] = [REQUIRED]
            return None
        value = str(value).strip()
        if not value:
            self.errors[name] = [BLANK]
            return None
        return value

    def number(self, name: str, choices: Mapping[int, Any] | None = None) -> int | None:
        """A required integer field, one of `choices` when they are given."""
        raw = self.text(name)
        if raw is None:
            return None
        value = as_int(raw)
        if value is None:
            self.errors[name] = [NOT_INT]
        elif choices is not None and value not in choices:
            self.errors[name] = [not_a_choice(raw)]
            return None
        return value
