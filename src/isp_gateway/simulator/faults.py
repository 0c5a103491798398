"""Fault injection: latency, 500s, hangs, 403s, 429s, garbage and empty bodies, each optionally
scoped.

Faults only touch paths under ``/api/``; the ``/_sim/`` control endpoints always answer.
A fault applies to a request when its scope matches: the fault's own entry in ``scopes`` if
there is one, else the global ``method``/``path_prefix`` (``None`` matches anything).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections import deque
from dataclasses import dataclass, field, fields
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

FAULT_NAMES = (
    "latency",
    "error_rate",
    "hang_rate",
    "force_403",
    "garbage",
    "rate_limit_per_minute",
    "force_429",
    "short_page",
    "unreadable_write",
    "empty_body",
    "blank_list",
)
# A list read answered 200 with no rows at all (`blank_list`): the bare list, or a page that
# counts none.
BLANK_LISTS = {
    "bare": [],
    "paged": {"count": 0, "next": None, "previous": None, "results": []},
}
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")

_ERROR_HTML = (
    b'<!doctype html>\n<html lang="en"><head><title>Server Error (500)</title></head>'
    b"<body><h1>Server Error (500)</h1><p></p></body></html>\n"
)
_GARBAGE_BODIES = (
    b'{"count": 120, "next": "http://',
    b"<html><body>Service Temporarily Unavailable</body></html>",
    b"\x00\x00\xff",
    b"{'detail': 'ok'}",
)


@dataclass
class Scope:
    """Restricts a fault to one HTTP method, a path prefix and/or pages from an offset on
    (``min_offset``: a list read that fails on a later page only)."""

    method: str | None = None
    path_prefix: str | None = None
    min_offset: int | None = None

    def matches(self, method: str, path: str, offset: int = 0) -> bool:
        if self.method is not None and self.method.upper() != method:
            return False
        if self.min_offset is not None and offset < self.min_offset:
            return False
        return self.path_prefix is None or path.startswith(self.path_prefix)


@dataclass
class Faults:
    """Runtime-mutable fault settings; all off by default."""

    latency: tuple[float, float] = (0.0, 0.0)
    error_rate: float = 0.0
    hang_rate: float = 0.0
    # How long a hung request sleeps unless the client goes away first.
    hang_seconds: float = 3600.0
    force_403: bool = False
    garbage: float = 0.0
    rate_limit_per_minute: int | None = None
    force_429: bool = False
    retry_after: int = 30
    # A list page that ends early: half its rows (an empty page for one row) and
    # `next: null`, the `count` unchanged (issue 17's "owes nothing").
    short_page: bool = False
    # A write answered 200 with an unreadable body, and not carried out.
    unreadable_write: bool = False
    # The share of requests carried out whose answer keeps its status but loses its body
    # (a proxy that drops it): a write happened and its answer cannot say what it made.
    empty_body: float = 0.0
    # A list read (a GET whose answer is a list page) answered 200 with no rows: "bare" `[]`
    # or "paged" `{"count": 0, "results": []}`, whatever the list holds; None: off.
    blank_list: str | None = None
    method: str | None = None
    path_prefix: str | None = None
    scopes: dict[str, Scope] = field(default_factory=dict)

    def scope_for(self, name: str) -> Scope:
        return self.scopes.get(name) or Scope(self.method, self.path_prefix)

    def reset(self) -> None:
        """Back to the defaults, in place (tests hold references to this object)."""
        for spec in fields(self):
            setattr(self, spec.name, getattr(Faults(), spec.name))

    def update(self, data: dict[str, Any]) -> None:
        """Apply a partial update (the control endpoint's JSON); ``{"reset": true}`` first."""
        checked = _check_update(data)
        if checked.pop("reset", False):
            self.reset()
        for name, value in checked.items():
            setattr(self, name, value)

    def as_dict(self) -> dict[str, Any]:
        return {
            "latency": list(self.latency),
            "error_rate": self.error_rate,
            "hang_rate": self.hang_rate,
            "hang_seconds": self.hang_seconds,
            "force_403": self.force_403,
            "garbage": self.garbage,
            "rate_limit_per_minute": self.rate_limit_per_minute,
            "force_429": self.force_429,
            "retry_after": self.retry_after,
            "short_page": self.short_page,
            "unreadable_write": self.unreadable_write,
            "empty_body": self.empty_body,
            "blank_list": self.blank_list,
            "method": self.method,
            "path_prefix": self.path_prefix,
            "scopes": {
                k: {"method": s.method, "path_prefix": s.path_prefix, "min_offset": s.min_offset}
                for k, s in self.scopes.items()
            },
        }


def _number(name: str, value: Any, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number")
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low} and {high}")
    return float(value)


def _optional_text(name: str, value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name} must be a string or null")
    return value


def parse_latency(value: Any) -> tuple[float, float]:
    """``0.3``, ``[0.3, 0.6]`` or ``"0.3,0.6"`` → (min, max) seconds."""
    if isinstance(value, str):
        value = [float(part) for part in value.split(",") if part.strip()]
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = [value, value]
    if not isinstance(value, list | tuple) or len(value) not in (1, 2):
        raise ValueError("latency must be a number, [min, max] or 'MIN,MAX'")
    low = _number("latency", value[0], 0, 3600)
    high = _number("latency", value[-1], low, 3600)
    return (low, high)


def _check_update(data: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in data.items():
        if name == "reset":
            out[name] = bool(value)
        elif name == "latency":
            out[name] = parse_latency(value)
        elif name in ("error_rate", "hang_rate", "garbage", "empty_body"):
            out[name] = _number(name, value, 0, 1)
        elif name == "hang_seconds":
            out[name] = _number(name, value, 0, 86400)
        elif name in ("force_403", "force_429", "short_page", "unreadable_write"):
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be true or false")
            out[name] = value
        elif name == "rate_limit_per_minute":
            out[name] = None if value is None else int(_number(name, value, 1, 1_000_000))
        elif name == "retry_after":
            out[name] = int(_number(name, value, 0, 86400))
        elif name == "blank_list":
            if value is not None and value not in BLANK_LISTS:
                raise ValueError(f"blank_list must be one of {', '.join(BLANK_LISTS)} or null")
            out[name] = value
        elif name in ("method", "path_prefix"):
            out[name] = _optional_text(name, value)
        elif name == "scopes":
            if not isinstance(value, dict):
                raise ValueError("scopes must be an object")
            scopes = {}
            for fault, scope in value.items():
                if fault not in FAULT_NAMES or not isinstance(scope, dict):
                    raise ValueError(f"bad scope for {fault!r}")
                min_offset = scope.get("min_offset")
                scopes[fault] = Scope(
                    _optional_text("method", scope.get("method")),
                    _optional_text("path_prefix", scope.get("path_prefix")),
                    None if min_offset is None else int(_number("min_offset", min_offset, 0, 1e9)),
                )
            out[name] = scopes
        else:
            raise ValueError(f"unknown fault setting {name!r}")
    return out


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps(body, ensure_ascii=False).encode(),
        status,
        headers=headers,
        media_type="application/json",
    )


class FaultInjector:
    """Decides, per request, whether a fault answers instead of the simulator."""

    def __init__(self, seed: int) -> None:
        # Seeded so that one sequence of requests meets the same faults on every run.
        self._rng = random.Random(f"faults:{seed}")
        self._window: deque[float] = deque()

    def reset_rate_window(self) -> None:
        self._window.clear()

    async def apply(self, faults: Faults, request: Request) -> Response | None:
        method, path = request.method, request.url.path
        raw_offset = request.query_params.get("offset", "")
        offset = int(raw_offset) if raw_offset.isdigit() else 0
        low, high = faults.latency
        if high > 0 and faults.scope_for("latency").matches(method, path, offset):
            await asyncio.sleep(self._rng.uniform(low, high))
        if faults.force_403 and faults.scope_for("force_403").matches(method, path, offset):
            return _json(403, {"detail": "Usted no tiene permiso para realizar esta acción."})
        if faults.force_429 and faults.scope_for("force_429").matches(method, path, offset):
            return self._throttled(faults.retry_after)
        limit = faults.rate_limit_per_minute
        if limit is not None and faults.scope_for("rate_limit_per_minute").matches(
            method, path, offset
        ):
            now = time.monotonic()
            while self._window and now - self._window[0] >= 60:
                self._window.popleft()
            if len(self._window) >= limit:
                return self._throttled(max(1, math.ceil(60 - (now - self._window[0]))))
            # Like DRF's throttle, only admitted requests enter the history.
            self._window.append(now)
        if faults.scope_for("hang_rate").matches(method, path, offset) and self._roll(
            faults.hang_rate
        ):
            await self._hang(request, faults.hang_seconds)
            return Response(b"", 504)
        if faults.scope_for("error_rate").matches(method, path, offset) and self._roll(
            faults.error_rate
        ):
            if self._rng.random() < 0.5:
                return Response(_ERROR_HTML, 500, media_type="text/html")
            return _json(500, {"detail": "Error interno del servidor."})
        if faults.scope_for("garbage").matches(method, path, offset) and self._roll(faults.garbage):
            return Response(self._rng.choice(_GARBAGE_BODIES), 200, media_type="application/json")
        if (
            faults.unreadable_write
            and method in WRITE_METHODS
            and faults.scope_for("unreadable_write").matches(method, path, offset)
        ):
            return Response(b"<html><body>OK</body></html>", 200, media_type="text/html")
        return None

    def after(self, faults: Faults, request: Request, response: Response) -> Response:
        """Faults on the simulator's own answer, the request carried out: `empty_body` drops
        the body (the status stays), `blank_list` empties a list read, `short_page` cuts a
        list page short."""
        method, path = request.method, request.url.path
        raw_offset = request.query_params.get("offset", "")
        offset = int(raw_offset) if raw_offset.isdigit() else 0
        if faults.scope_for("empty_body").matches(method, path, offset) and self._roll(
            faults.empty_body
        ):
            return Response(b"", response.status_code)
        blank = self._blank(faults, request, response, offset)
        if blank is not None:
            return blank
        if not (
            faults.short_page
            and method == "GET"
            and response.status_code == 200
            and faults.scope_for("short_page").matches(method, path, offset)
        ):
            return response
        raw = getattr(response, "body", None)
        if not isinstance(raw, bytes | memoryview):
            return response
        try:
            body = json.loads(bytes(raw))
        except ValueError:
            return response
        if not isinstance(body, dict) or not isinstance(body.get("results"), list):
            return response
        rows = body["results"]
        body["results"] = rows[: len(rows) // 2]
        body["next"] = None
        return _json(200, body)

    @staticmethod
    def _blank(
        faults: Faults, request: Request, response: Response, offset: int
    ) -> Response | None:
        method, path = request.method, request.url.path
        if (
            faults.blank_list is None
            or method != "GET"
            or response.status_code != 200
            or not faults.scope_for("blank_list").matches(method, path, offset)
        ):
            return None
        raw = getattr(response, "body", None)
        try:
            body = json.loads(bytes(raw)) if isinstance(raw, bytes | memoryview) else None
        except ValueError:
            return None
        if isinstance(body, list) or (
            isinstance(body, dict) and isinstance(body.get("results"), list)
        ):
            blank = json.dumps(BLANK_LISTS[faults.blank_list]).encode()
            return Response(blank, 200, media_type="application/json")
        return None

    def _roll(self, rate: float) -> bool:
        return rate > 0 and self._rng.random() < rate

    @staticmethod
    def _throttled(retry_after: int) -> Response:
        return _json(
            429,
            {
                "detail": "Solicitud fue regulada. Se espera disponibilidad en "
                f"{retry_after} segundos."
            },
            {"Retry-After": str(retry_after)},
        )

    @staticmethod
    async def _hang(request: Request, seconds: float) -> None:
        # Sleep in short steps so a client that gave up frees the server (and lets the test
        # server shut down) instead of pinning a task for an hour.
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if await request.is_disconnected():
                return
            await asyncio.sleep(0.05)
