"""Small readers for WispHub's loosely typed JSON (numbers often arrive as strings)."""

from __future__ import annotations

from typing import Any


def as_int(value: Any) -> int | None:
    """An int from an int, a digit string (`"12"`, `" -3 "`) or a whole float; else None.
    Booleans are not numbers here, although Python says they are ints."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None
