"""Small readers for WispHub's loosely typed JSON (numbers often arrive as strings), and of
the field errors its forms (Django REST framework) refuse a write with."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from isp_gateway.kit.errors import UpstreamRejected


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


def field_errors(body: Any, our_fields: Mapping[str, str]) -> list[tuple[str, str]]:
    """DRF errors as (our field name, message) pairs, text only and bounded; `detail`,
    `non_field_errors` and the fields we do not send (not in `our_fields`, the backend's
    names in ours) are reported as "request"."""
    pairs: list[tuple[str, str]] = []
    if not isinstance(body, dict):
        return pairs
    for name, messages in body.items():
        items = messages if isinstance(messages, list) else [messages]
        for message in items:
            if isinstance(message, str) and message.strip():
                field = our_fields.get(str(name), "request")
                pairs.append((field, " ".join(message.split())[:200]))
    return pairs[:10]


class FormRejected(UpstreamRejected):
    """The backend refused a form (4xx): nothing was done. `fields`: its errors as (our
    field name, message) pairs; `of_request`: a 400 naming fields (the request's own values
    are at fault, not a backend that failed)."""

    # The form's fields, the backend's names in ours.
    our_fields: ClassVar[Mapping[str, str]] = {}

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(status, body)
        self.fields = field_errors(body, self.our_fields)
        self.of_request = status == 400 and bool(self.fields)
