"""Refused requests, counted rather than stored one by one (CALLERS.md 6, "The audit cannot
be flushed").

A refusal (a 401, a missing scope, a rate limit, a missing verification, an identity call
refused by a lock, an MCP call that named no customer) costs one dictionary update in the
worker that refused it: no store call, no log line, so a flood of bad tokens costs no more
than the refusal itself. Every FLUSH_SECONDS each worker adds its counts to one counter per
(caller, event, outcome, kind, minute) in the store, and writes one log line per such group
with the count it adds (the log lines of a group add up to its count).

The worker whose addition created the counter writes the group's event to the counted
stream (streams.py), with the count so far; readers show the counter's current value. Once
the minute is over (FINAL_AFTER_SECONDS past it, when every worker has added its last
count), that worker writes the event again, final, with the final count, which replaces the
first for every reader. So there is one event per group, whatever the number of workers,
and the counter need only live until then (TALLY_SECONDS).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from isp_gateway.kit import tasks
from isp_gateway.kit.errors import StoreUnavailable

if TYPE_CHECKING:
    from isp_gateway.kit.storage import Store

log = logging.getLogger("isp_gateway.audit")

FLUSH_SECONDS = 1.0
FINAL_AFTER_SECONDS = 5.0
# A counter outlives its final event by far; past this a provisional event whose worker
# died before writing it final shows the count it was written with.
TALLY_SECONDS = 3600
# Groups one worker holds between flushes (callers x kinds of refusal): a bound for a store
# away for long, past which refusals are dropped from the count, and a warning says so.
MAX_GROUPS = 10_000

# (caller, event, outcome, kind): what one counted event is about, within its minute.
Group = tuple[str | None, str, str, str | None]


def now_text() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(slots=True)
class _Batch:
    """Refusals of one group and minute this worker has not yet added to the store; the
    event is its first refusal's."""

    entry: dict[str, Any]
    count: int = 0
    unlogged: int = 0


@dataclass(slots=True)
class _Owned:
    """A group whose counter this worker created: it writes the group's events."""

    minute: int
    entry: dict[str, Any]
    count: int
    written: bool = False


class Tally:
    def __init__(
        self,
        store: Store,
        key: str,
        max_events: int,
        write_line: Callable[[dict[str, Any]], None],
    ) -> None:
        self._store = store
        self._key = key
        self._max_events = max_events
        self._line = write_line
        self._pending: dict[tuple[int, Group], _Batch] = {}
        self._owned: dict[str, _Owned] = {}
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._dropped = 0
        self._failing = False

    def add(self, group: Group, make: Callable[[], dict[str, Any]]) -> None:
        """Count one refusal of `group` now; `make` builds its event when it is the first
        of its group and minute in this worker."""
        slot = (int(time.time() // 60), group)
        batch = self._pending.get(slot)
        if batch is None:
            if len(self._pending) >= MAX_GROUPS:
                self._dropped += 1
                return
            batch = self._pending[slot] = _Batch(make())
        batch.count += 1
        batch.unlogged += 1

    def tally_key(self, minute: int, group: Group) -> str:
        digest = hashlib.blake2s(json.dumps(group).encode(), digest_size=10).hexdigest()
        return f"{self._key}:tally:{minute}:{digest}"

    @property
    def idle(self) -> bool:
        return not self._pending and not self._owned and not self._dropped

    async def flush(self, *, closing: bool = False) -> None:
        """Add this worker's counts to the store and write the events it owns that are due
        (all of them when `closing`). What the store did not take stays for the next flush."""
        async with self._lock:
            pending, self._pending = self._pending, {}
            if self._dropped:
                log.warning(
                    "audit: %d refusals not counted (more than %d kinds of refusal waiting "
                    "for the store)",
                    self._dropped,
                    MAX_GROUPS,
                )
                self._dropped = 0
            try:
                for slot in list(pending):
                    await self._add(slot, pending[slot])
                    del pending[slot]
                await self._write_owned(closing)
            finally:
                self._keep(pending)

    def _keep(self, left: dict[tuple[int, Group], _Batch]) -> None:
        for slot, batch in left.items():
            newer = self._pending.get(slot)
            if newer is not None:
                batch.count += newer.count
                batch.unlogged += newer.unlogged
            self._pending[slot] = batch

    async def _add(self, slot: tuple[int, Group], batch: _Batch) -> None:
        minute, group = slot
        if batch.unlogged:
            # The log line first: a refusal is in the logs even while the store is away.
            self._line(_with_count(batch.entry, batch.unlogged))
            batch.unlogged = 0
        tally = self.tally_key(minute, group)
        total = await self._store.incr(tally, batch.count, ttl=TALLY_SECONDS)
        if total == batch.count:  # this addition created the counter
            self._owned[tally] = _Owned(minute, batch.entry, total)

    async def _write_owned(self, closing: bool) -> None:
        now = time.time()
        for tally, owned in list(self._owned.items()):
            due = closing or now >= (owned.minute + 1) * 60 + FINAL_AFTER_SECONDS
            if due:
                value = await self._store.get(tally)
                count = int(value) if value is not None else owned.count
                await self._append(owned.entry, tally, count, final=True)
                del self._owned[tally]
            elif not owned.written:
                await self._append(owned.entry, tally, owned.count, final=False)
                owned.written = True

    async def _append(self, entry: dict[str, Any], tally: str, count: int, *, final: bool) -> None:
        value = {
            "event": _with_count(entry, count),
            "tally": tally,
            "final": final,
            "written": now_text(),
        }
        await self._store.log_append(self._key, value, self._max_events)

    # -- the worker's flushing task -----------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="audit-tally")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            if self.idle:
                continue
            try:
                await self.flush()
            except StoreUnavailable:
                if not self._failing:  # once per outage, not once a second
                    log.warning("audit: counted refusals wait for the store (it is away)")
                self._failing = True
                continue
            except Exception as exc:  # the loop must outlive one bad flush; no traceback
                log.error("audit: counted refusals not flushed: %s", type(exc).__name__)
                continue
            self._failing = False

    async def aclose(self) -> None:
        """Stop the task and write what this worker holds, final."""
        await tasks.stop(self._task)
        self._task = None
        try:
            await self.flush(closing=True)
        except Exception as exc:
            log.warning("audit: counted refusals lost at stop: %s", type(exc).__name__)


def _with_count(entry: dict[str, Any], count: int) -> dict[str, Any]:
    return {**entry, "details": {**entry["details"], "count": count}}
