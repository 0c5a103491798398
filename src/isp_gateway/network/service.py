"""Ping diagnostics (spec 4.12-4.13, DECISIONS.md "Network"): managed upstream ping tasks.

The service keeps its own record of every task it started (`ping:task:{id}` in the store, for
PING_TASK_TTL_SECONDS) so that any worker can answer a poll:
- while the task runs, at most one upstream read per PING_POLL_INTERVAL_SECONDS per task,
  however many clients poll (the last check time lives in the record; a per-task store lock
  serialises the checkers);
- once final, polls are answered from the record alone;
- two creates for one service within PING_COALESCE_SECONDS share one upstream task
  (`ping:service:{service_id}` → our task id, written under a per-service lock).

Audit (CALLERS.md 4 and 6): a `ping` event per create, its answer's action as the outcome
(`ping_created`, `client_not_found`, `ping_failed`), and one per task when its result is
decided (the final action), recorded by the poll that read it: a loop of polls adds none.
Kept one by one only what had the backend start a task (its creation and its result);
a create that joined a running task and a refused one started nothing, and any caller may
repeat them at no cost: counted per caller, service and minute (a made-up service per
caller and minute), so a loop of them never pushes the pings and diagnoses out.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from isp_gateway.clients.misses import LOOKUP
from isp_gateway.kit import deadline as request_deadline
from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.kit.errors import (
    NotFound,
    ServiceError,
    StoreUnavailable,
    UpstreamError,
    UpstreamRateLimited,
    UpstreamUnavailable,
)
from isp_gateway.network.classify import FAILED, PING, Classification, classify
from isp_gateway.store import LockTimeout
from isp_gateway.upstream.ping import (
    PingRefused,
    PingServiceUnknown,
    PingTaskNotFound,
    create_ping,
    read_task,
)
from isp_gateway.web.params import MAX_WAIT_SECONDS

if TYPE_CHECKING:
    from isp_gateway.clients.service import ClientService
    from isp_gateway.parts import Parts

log = logging.getLogger("isp_gateway.network")

# A task still running after this long is reported failed: a stuck upstream task must not
# keep a bot polling for the whole hour the record lives.
MAX_RUNNING_SECONDS = 300.0
# How often a long poll looks at the shared record (another worker may have checked).
_RECORD_POLL_SECONDS = 0.2
_TASK_ID = re.compile(r"[0-9a-f]{32}")

TASK_NOT_FOUND = "task"
# Of the answer's 2 s margin past the request's deadline, what a create's upstream call may
# use (as a ticket's POST does).
ANSWER_MARGIN_SECONDS = 1.0


def _time_left(seconds: float) -> float:
    """`seconds`, or less: what the request's deadline leaves (never below nothing)."""
    current = request_deadline.current()
    return seconds if current is None else max(0.0, min(seconds, current.left()))


class PingFailed(ServiceError):
    """The upstream refused or could not run the ping (spec 4.12 `ping_failed`)."""

    status_code = 502
    action = Action.PING_FAILED
    variant = "rest"


@dataclass(frozen=True)
class PingView:
    """What a poll answers: the router wraps it in the envelope as is."""

    ok: bool
    type: Literal["success", "error", "info"]
    action: str
    data: dict[str, Any]
    message: str


@dataclass(frozen=True, slots=True)
class PingStart:
    """A create's answer: our task id, and whether it joined the service's running task
    (PING_COALESCE_SECONDS) rather than have the backend start one."""

    task_id: str
    joined: bool


def _task_key(task_id: str) -> str:
    return f"ping:task:{task_id}"


def _service_key(service_id: int) -> str:
    return f"ping:service:{service_id}"


class PingService:
    def __init__(self, parts: Parts, *, clients: ClientService) -> None:
        self.settings, self.store, self.gateway = parts.settings, parts.store, parts.gateway
        self.audit, self.stopping, self.clients = parts.audit, parts.stopping, clients
        # A holder of the create/check locks is inside one upstream call at most.
        self._lock_timeout = self.settings.UPSTREAM_TIMEOUT_SECONDS + 5.0
        # Upstream reads a long poll stopped waiting for at its deadline; they finish here.
        self._late_checks: set[asyncio.Task[dict[str, Any] | None]] = set()

    async def start(self) -> None:
        """Nothing runs in the background: tasks advance when someone polls."""

    async def aclose(self) -> None:
        """Stop the upstream reads that long polls left running."""
        for check in list(self._late_checks):
            check.cancel()
        if self._late_checks:
            await asyncio.gather(*self._late_checks, return_exceptions=True)

    # -- create ------------------------------------------------------------------------

    async def create(self, service_id: int, pings: int) -> PingStart:
        """Start (or join) a ping task for a service. Audited either way."""
        try:
            started = await self._create(service_id, pings)
        except StoreUnavailable:
            raise  # the audit lives in the store too: the 503 says it all
        except ServiceError as refused:
            # No ping was started (an unknown service, the ping rate, the budget, a backend
            # that failed): counted as every refusal is (CALLERS.md 6).
            unknown = refused.action == Action.CLIENT_NOT_FOUND
            self.audit.count_about("ping", refused.action, None if unknown else service_id)
            raise
        if started.joined:
            # The service's running task: nothing asked of the backend, free to repeat.
            details = {"joined": True}
            self.audit.count_about("ping", Action.PING_CREATED, service_id, details)
        else:
            # No task id in details: the audit masks its digit runs (CALLERS.md 4), so it
            # would not name the task anyway; the service and the time do.
            await self.audit.record("ping", Action.PING_CREATED, service_id=service_id)
        return started

    async def _create(self, service_id: int, pings: int) -> PingStart:
        if service_id < 1:
            raise NotFound(action=Action.CLIENT_NOT_FOUND, variant=LOOKUP)
        coalesce = self.settings.PING_COALESCE_SECONDS > 0
        if coalesce:
            shared = await self._shared_task(service_id)
            if shared is not None:
                return PingStart(shared, joined=True)
        await self._check_client(service_id)
        try:
            # Every answer within UPSTREAM_TIMEOUT_SECONDS + 2 s (CALLERS.md 2): the lock is
            # waited for, and the upstream asked, only while the request has time left (a
            # create waiting on one the backend hangs on would add its own timeout to it).
            async with self.store.lock(
                f"ping:create:{service_id}",
                timeout=self._lock_timeout,
                blocking_timeout=_time_left(self._lock_timeout),
            ):
                if coalesce:
                    # Checked again under the lock: a concurrent request may have just created it.
                    shared = await self._shared_task(service_id)
                    if shared is not None:
                        return PingStart(shared, joined=True)
                upstream_id = await self._start_upstream(service_id, pings)
                task_id = uuid.uuid4().hex
                now = time.time()
                record = {
                    "task_id": task_id,
                    "service_id": service_id,
                    "upstream_id": upstream_id,
                    "pings": pings,
                    "created_at": now,
                    # Creating the task was our latest contact: the first read waits an interval.
                    "checked_at": now,
                    "state": "running",
                }
                await self.store.set(
                    _task_key(task_id), record, ttl=self.settings.PING_TASK_TTL_SECONDS
                )
                if coalesce:
                    await self.store.set(
                        _service_key(service_id), task_id, ttl=self.settings.PING_COALESCE_SECONDS
                    )
                log.info("ping task %s started for service %d", task_id, service_id)
                return PingStart(task_id, joined=False)
        except LockTimeout:
            raise UpstreamUnavailable() from None

    async def _shared_task(self, service_id: int) -> str | None:
        shared = await self.store.get(_service_key(service_id))
        if isinstance(shared, str) and await self.store.get(_task_key(shared)) is not None:
            return shared
        return None

    async def _check_client(self, service_id: int) -> None:
        """Refuse an unknown service before spending an upstream ping on it.

        Only a confirmed miss counts: when the clients source cannot answer, the ping request
        goes ahead and the upstream's own 404 still means an unknown service.
        """
        try:
            client = await self.clients.get_client(service_id)
        except ServiceError as exc:
            log.info("client check for service %d unavailable (%s)", service_id, exc.action)
            return
        if client is None:
            raise NotFound(action=Action.CLIENT_NOT_FOUND, variant=LOOKUP)

    async def _start_upstream(self, service_id: int, pings: int) -> str:
        left = _time_left(self.settings.UPSTREAM_TIMEOUT_SECONDS)
        try:
            return await create_ping(
                self.gateway, service_id, pings, timeout=left + ANSWER_MARGIN_SECONDS
            )
        except PingServiceUnknown:
            raise NotFound(action=Action.CLIENT_NOT_FOUND, variant=LOOKUP) from None
        except PingRefused:
            # Logged with the upstream's answer where it was read (upstream/ping.py).
            raise PingFailed() from None

    # -- result ------------------------------------------------------------------------

    async def result(self, task_id: str, wait: float = 0.0) -> PingView:
        """The task's outcome; with `wait`, hold until it is final or `wait` seconds pass.

        A worker asked to stop answers at once with what it has (issue 21): the final result,
        else `ping_pending` and the task id, which the bot's next poll takes to another
        replica (the record is in the shared store)."""
        if not _TASK_ID.fullmatch(task_id):
            raise NotFound(action=FAILED, variant=TASK_NOT_FOUND)
        interval = self.settings.PING_POLL_INTERVAL_SECONDS
        deadline = time.monotonic() + max(0.0, min(wait, MAX_WAIT_SECONDS))
        last_error: UpstreamError | None = None
        while True:
            record = await self.store.get(_task_key(task_id))
            if not isinstance(record, dict):
                raise NotFound(action=FAILED, variant=TASK_NOT_FOUND)
            due = time.time() - record["checked_at"] >= interval
            if record.get("state") != "final" and due and not self.stopping.is_set():
                check = asyncio.ensure_future(self._check(task_id, deadline))
                if wait > 0:
                    # A long poll answers when its wait is over (or the worker stops), even
                    # if the upstream read it started hangs (up to the upstream timeout): the
                    # bot's reply window is what `wait` was chosen for. The read goes on and
                    # records its result.
                    try:
                        await self.stopping.pause(max(0.0, deadline - time.monotonic()), check)
                    except asyncio.CancelledError:
                        # The client went away; the read is harmless and may serve others.
                        self._leave_running(check, task_id)
                        raise
                    if not check.done():
                        self._leave_running(check, task_id)
                        return self._pending_view(task_id)
                try:
                    checked = await check
                    last_error = None
                except UpstreamError as exc:
                    last_error = exc
                    # CALLERS.md 2: a Retry-After longer than the time left is answered at
                    # once, not waited out to the end of the long poll.
                    if isinstance(exc, UpstreamRateLimited) and (
                        exc.retry_after >= deadline - time.monotonic()
                    ):
                        raise
                else:
                    if checked is not None:
                        record = checked
            if record.get("state") == "final":
                return self._final_view(record)
            if self.stopping.is_set():
                return self._pending_view(task_id)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if last_error is not None:
                    # The record stays; a later poll tries the upstream again.
                    raise last_error
                return self._pending_view(task_id)
            until_check = interval - (time.time() - record["checked_at"])
            await self.stopping.pause(max(0.01, min(remaining, _RECORD_POLL_SECONDS, until_check)))

    @staticmethod
    def _pending_view(task_id: str) -> PingView:
        return PingView(
            ok=True,
            type="info",
            action=Action.PING_PENDING,
            data={"task_id": task_id, "status": "pending"},
            message=messages.say(Action.PING_PENDING, PING),
        )

    def _leave_running(self, check: asyncio.Task[dict[str, Any] | None], task_id: str) -> None:
        """Keep a read that outlived its poll referenced until it ends; its failure was
        logged by the gateway and a later poll retries, so the exception is only consumed."""
        self._late_checks.add(check)

        def done(task: asyncio.Task[dict[str, Any] | None]) -> None:
            self._late_checks.discard(task)
            if task.cancelled():
                return
            exc = task.exception()
            if exc is not None and not isinstance(exc, UpstreamError):
                log.error("ping task %s: check crashed", task_id, exc_info=exc)

        check.add_done_callback(done)

    async def _check(self, task_id: str, deadline: float) -> dict[str, Any] | None:
        """Read the task upstream unless someone did within the interval; the new record."""
        key = _task_key(task_id)
        wait_for_lock = max(1.0, deadline - time.monotonic())
        try:
            async with self.store.lock(
                f"ping:check:{task_id}", timeout=self._lock_timeout, blocking_timeout=wait_for_lock
            ):
                record = await self.store.get(key)
                if not isinstance(record, dict) or record.get("state") == "final":
                    return record if isinstance(record, dict) else None
                now = time.time()
                if now - record["checked_at"] < self.settings.PING_POLL_INTERVAL_SECONDS:
                    return record  # another poller just asked
                record["checked_at"] = now
                try:
                    result = await read_task(self.gateway, record["upstream_id"])
                except PingTaskNotFound:
                    # The upstream no longer knows the task or refuses to show it.
                    log.warning("ping task %s: the upstream no longer shows it", task_id)
                    self._finish(record, Classification(FAILED))
                except UpstreamError:
                    # Remember the attempt so a failing upstream is not hammered either.
                    await self._save(key, record)
                    raise
                else:
                    if result.state != "running":
                        self._finish(record, classify(result))
                    elif now - record["created_at"] > MAX_RUNNING_SECONDS:
                        log.warning(
                            "ping task %s still running after %.0fs",
                            task_id,
                            now - record["created_at"],
                        )
                        self._finish(record, Classification(FAILED))
                if record.get("state") == "final":
                    # Decided here, once per task (the record is final from now on).
                    await self.audit.record(
                        "ping", str(record["action"]), service_id=record.get("service_id")
                    )
                await self._save(key, record)
                return record
        except LockTimeout:
            return None  # another poller is checking; its answer lands in the record

    @staticmethod
    def _finish(record: dict[str, Any], outcome: Classification) -> None:
        record.update(
            state="final",
            action=outcome.action,
            sent=outcome.sent,
            received=outcome.received,
            loss_percent=outcome.loss_percent,
        )

    async def _save(self, key: str, record: dict[str, Any]) -> None:
        # The record keeps the lifetime it got at creation.
        age = time.time() - float(record["created_at"])
        await self.store.set(key, record, ttl=max(1.0, self.settings.PING_TASK_TTL_SECONDS - age))

    @staticmethod
    def _final_view(record: dict[str, Any]) -> PingView:
        action = str(record["action"])
        outcome = Classification(
            action, record.get("sent"), record.get("received"), record.get("loss_percent")
        )
        failed = action == FAILED
        return PingView(
            ok=not failed,
            type="error" if failed else "success",
            action=action,
            data={
                "task_id": record["task_id"],
                "sent": outcome.sent,
                "received": outcome.received,
                "loss_percent": outcome.loss_percent,
            },
            message=outcome.message,
        )
