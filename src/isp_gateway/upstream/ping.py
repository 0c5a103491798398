"""WispHub ping diagnostics: create a ping task, read it, and map its result to `PingResult`.

Shapes (UPSTREAM.md "Ping diagnostics"): `POST api/clientes/{id}/ping/` answers 202
`{"task_id", "status": "PROCESS"}`; `GET api/tasks/{id}/` answers `{"task": {"status", "result"}}`
where a successful result is a list of one-key objects `{"ping-N": {...} | "router error text"}`
closed by `{"ping-exitoso": "X de N"}`, which we ignore (it counts unreachable hosts as replies).
"""

from __future__ import annotations

import logging
import re
from typing import Any, Literal

from pydantic import BaseModel

from isp_gateway.kit.errors import UpstreamRejected, UpstreamUnavailable
from isp_gateway.upstream.gateway import UpstreamGateway
from isp_gateway.upstream.records import as_int

# Celery task states: these mean "not finished yet"; SUCCESS is done; anything else failed.
log = logging.getLogger("isp_gateway.upstream.ping")

_RUNNING = frozenset({"PENDING", "PROCESS", "PROGRESS", "STARTED", "RECEIVED", "RETRY"})
_PING_KEY = re.compile(r"ping-(\d+)")


class PingEntry(BaseModel):
    """One ping of a task: a probe with its counts, or a router error (`error` set)."""

    host: str | None = None
    sent: int = 0
    received: int = 0
    status: str | None = None
    error: str | None = None


class PingResult(BaseModel):
    """A task as we understand it. `entries` is None when a finished result is malformed."""

    state: Literal["running", "success", "failure"]
    entries: list[PingEntry] | None = None
    detail: str | None = None


class PingRefused(Exception):
    """The upstream answered the ping request without accepting a task."""

    def __init__(self, status: int) -> None:
        super().__init__(f"ping not accepted ({status})")
        self.upstream_status = status


class PingServiceUnknown(Exception):
    """The upstream does not know the service asked to ping (its 404)."""


class PingTaskNotFound(Exception):
    """The upstream no longer knows the task, or refuses to show it: the task has failed."""


async def create_ping(
    gateway: UpstreamGateway, service_id: int, pings: int, *, timeout: float | None = None
) -> str:
    """Ask the upstream to ping a service's device; the upstream task id. `timeout`, when
    given, replaces UPSTREAM_TIMEOUT_SECONDS (the time the request has left).

    Raises `PingServiceUnknown`, `PingRefused` (any other refusal), or the gateway's errors.
    """
    try:
        response = await gateway.request(
            "POST", f"api/clientes/{service_id}/ping/", json={"pings": pings}, timeout=timeout
        )
    except UpstreamRejected as exc:
        if exc.upstream_status == 404:
            raise PingServiceUnknown() from None
        log.warning("upstream refused a ping for service %d (%d)", service_id, exc.upstream_status)
        raise PingRefused(exc.upstream_status) from None
    # Only 202 means a task was queued (UPSTREAM.md): anything else is a failure.
    try:
        if response.status_code != 202:
            raise PingRefused(response.status_code)
        try:
            body = response.json()
        except ValueError:
            raise PingRefused(response.status_code) from None
        task_id = body.get("task_id") if isinstance(body, dict) else None
        if (
            not isinstance(task_id, str | int)
            or isinstance(task_id, bool)
            or not str(task_id).strip()
        ):
            raise PingRefused(response.status_code)
    except PingRefused as refused:
        log.warning(
            "upstream did not queue a ping for service %d (%d)",
            service_id,
            refused.upstream_status,
        )
        raise
    return str(task_id).strip()


async def read_task(gateway: UpstreamGateway, task_id: str) -> PingResult:
    """The task's state. Raises `PingTaskNotFound` (the upstream no longer knows the task or
    refuses to show it) or the gateway's errors."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", task_id):
        # Never build an upstream path from something that is not a plain id.
        raise PingTaskNotFound()
    try:
        body = await gateway.get_json(f"api/tasks/{task_id}/")
    except UpstreamRejected as exc:
        log.warning("ping task read: upstream answered %d", exc.upstream_status)
        raise PingTaskNotFound() from None
    task = body.get("task") if isinstance(body, dict) else None
    if not isinstance(task, dict) or not isinstance(task.get("status"), str):
        # Not the answer of a tasks endpoint at all: treat like garbage from a proxy.
        raise UpstreamUnavailable()
    return parse_task(task["status"], task.get("result"))


def _entry(value: Any) -> PingEntry | None:
    """One `ping-N` value: a probe dict, a router error text, or None when unusable."""
    if isinstance(value, str):
        return PingEntry(error=value.strip() or "router error")
    if not isinstance(value, dict):
        return None
    sent = as_int(value.get("sent"))
    received = as_int(value.get("received"))
    status = value.get("status")
    status = status.strip().lower() if isinstance(status, str) and status.strip() else None
    if sent is None:
        # A probe always sends one packet; older routers omit the counter.
        sent = 1
    if status in ("timeout", "host unreachable"):
        # Not a reply, whatever the counters or ping-exitoso say.
        received = 0
    elif received is None:
        received = 1 if value.get("time") else 0
    received = max(0, min(received, sent))
    host = value.get("host")
    return PingEntry(
        host=host if isinstance(host, str) else None, sent=sent, received=received, status=status
    )


def parse_task(status: str, result: Any) -> PingResult:
    """Map a task's status and result to a `PingResult` (pure; unit-tested per shape)."""
    state = status.strip().upper()
    if state in _RUNNING:
        return PingResult(state="running")
    if state != "SUCCESS":
        detail = result if isinstance(result, str) else None
        return PingResult(state="failure", detail=detail)
    if not isinstance(result, list):
        return PingResult(state="success", entries=None)
    numbered: list[tuple[int, PingEntry]] = []
    for item in result:
        if not isinstance(item, dict):
            continue
        for key, value in item.items():
            match = _PING_KEY.fullmatch(str(key))
            if match is None:
                continue  # "ping-exitoso" and anything else we do not trust
            entry = _entry(value)
            if entry is not None:
                numbered.append((int(match.group(1)), entry))
    if not numbered:
        return PingResult(state="success", entries=None)
    numbered.sort(key=lambda pair: pair[0])
    return PingResult(state="success", entries=[entry for _, entry in numbered])
