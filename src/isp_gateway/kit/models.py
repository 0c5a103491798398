"""Shared base of the JSON request bodies."""

from __future__ import annotations

import types
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, model_validator

# For a `pattern`: a character that is not whitespace in any regex dialect (JSON Schema's,
# Python's, Rust's) nor for Python's str.strip, i.e. "not blank".
NON_BLANK = r"[^\s\x1c-\x1f\x85]"


def _takes_int(annotation: Any) -> bool:
    """`int`, or `int | None`: a field whose JSON Schema type is "integer"."""
    if annotation is int:
        return True
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        return args == [int]
    return False


class RequestModel(BaseModel):
    """A JSON request body, validated strictly: `"4"` or `true` where an integer belongs is
    a wrong type (422 `validation_error`), not a guess at what the caller meant. Integers
    are accepted where a number with decimals belongs."""

    model_config = ConfigDict(strict=True)

    @model_validator(mode="before")
    @classmethod
    def _integral_numbers(cls, data: Any) -> Any:
        """`4.0` where an integer belongs is that integer: JSON does not tell 4 from 4.0, and
        JSON Schema's "integer" (what the OpenAPI document promises) accepts both. A
        fraction (`4.5`) stays a wrong type."""
        if not isinstance(data, dict):
            return data
        fixed = None
        for name, field in cls.model_fields.items():
            key = field.alias or name
            value = data.get(key)
            if type(value) is float and value.is_integer() and _takes_int(field.annotation):
                fixed = fixed if fixed is not None else dict(data)
                fixed[key] = int(value)
        return data if fixed is None else fixed
