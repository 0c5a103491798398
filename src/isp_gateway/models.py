"""Shared base of the JSON request bodies."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class RequestModel(BaseModel):
    """A JSON request body, validated strictly: `"4"` or `true` where an integer belongs is
    a wrong type (422 `validation_error`), not a guess at what the caller meant. Integers
    are accepted where a number with decimals belongs."""

    model_config = ConfigDict(strict=True)
