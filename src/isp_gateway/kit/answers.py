"""An answer as the API sends it, without HTTP: the envelope (spec 2.1) and its status.

The service layer decides answers and keeps them (idempotent writes replay them byte for
byte); the edge (web/envelope.py) renders them. Nothing here imports a web framework.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from isp_gateway.kit.errors import ServiceError


def envelope(
    *,
    ok: bool = True,
    type: Literal["success", "error", "info"] = "success",
    action: str | None = None,
    data: Any = None,
    message: str | None = None,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "ok": ok,
        "type": type,
        "action": action,
        "data": data,
        "message": message,
        "meta": meta,
    }


def failure(
    action: str,
    message: str,
    *,
    data: Any = None,
    meta: dict[str, Any] | None = None,
    type: Literal["success", "error", "info"] = "error",
) -> dict[str, Any]:
    """The envelope of a refusal (`ok: false`)."""
    return envelope(ok=False, type=type, action=action, data=data, message=message, meta=meta)


def success(
    action: str | None,
    data: Any = None,
    *,
    message: str | None = None,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return envelope(action=action, data=data, message=message, meta=meta)


@dataclass(frozen=True, slots=True)
class Answer:
    """A decided answer: its status, envelope and headers."""

    status_code: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of_error(cls, error: ServiceError) -> Answer:
        """A refusal as the error handler renders it."""
        body = failure(
            error.action, error.message, data=error.data, meta=error.meta, type=error.type
        )
        return cls(error.status_code, body, dict(error.headers))
