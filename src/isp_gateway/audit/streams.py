"""Where the audit keeps each event, and how a query reads them back (CALLERS.md 4 and 6).

Each family of events has its own capped stream, `AUDIT_MAX_EVENTS` each, so a flood of one
kind never evicts another: writes (client updates, tickets), network actions (pings,
diagnoses), identity checks (verify, resolve), logins, MCP tool calls about a customer, and
the counted stream (tally.py), where refusals are kept as one event per caller, event and
minute. A caller that can only be refused, or can only read a catalogue, reaches none but
the counted stream.

A query reads the streams it needs newest first, a page at a time, and merges them by the
events' `time`. The counted stream is not in `time` order: a counted event is written when
its first refusal is flushed (within seconds) and written again, final, when its minute is
over. Each entry there carries when it was `written`; an entry is never written before its
event happened, so once the reader has gone back to entries written at W, no unread entry
holds an event newer than W, and what it holds newer than W can be given out in order.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Mapping

    from isp_gateway.kit.storage import Store

# The events each family stream keeps one by one (key suffixes of the audit's key). The
# writes keep the audit's own key, as before there were several streams.
FAMILIES: dict[str, str] = {
    "client_update": "",
    "ticket_create": "",
    "payment_promise": "",
    "payment_report": "",
    "ping": ":network",
    "diagnose": ":network",
    "verify": ":identity",
    "resolve": ":identity",
    "login": ":login",
    "mcp_tool": ":mcp",
    # The outage notices: a flip and a notice dropped undelivered (OUTAGES.md 3).
    "outage": ":notices",
    "webhook": ":notices",
}
COUNTED = ":counted"
# How many entries one store read brings back while a filtered query pages back.
PAGE = 500


@dataclass(frozen=True, slots=True)
class AuditQuery:
    service_id: int | None = None
    caller: str | None = None
    event: str | None = None

    def matches(self, event: Mapping[str, Any]) -> bool:
        if self.event is not None and event.get("event") != self.event:
            return False
        if self.caller is not None and event.get("caller") != self.caller:
            return False
        return self.service_id is None or str(event.get("service_id")) == str(self.service_id)

    @property
    def unfiltered(self) -> bool:
        return self.service_id is None and self.caller is None and self.event is None


def family_keys(base: str, event: str | None) -> list[str]:
    """The family streams a query for `event` (None: every event) reads."""
    if event is None:
        suffixes = set(FAMILIES.values())
    elif event in FAMILIES:
        suffixes = {FAMILIES[event]}
    else:
        suffixes = set()  # an event that is only ever counted
    return [base + suffix for suffix in sorted(suffixes)]


# A stored event's hidden field: when it was made, in nanoseconds, to order events of one
# millisecond (`time` shows milliseconds) as they were made. Never shown.
ORDER = "_at"


@dataclass(slots=True)
class Item:
    """An event on its way out of a query; `tally` names the live count of a counted event
    whose minute may not be over yet (read once, for every such event, at the end)."""

    time: str
    entry: dict[str, Any]
    tally: str | None = None
    at: int = 0

    @classmethod
    def of(cls, entry: dict[str, Any], tally: str | None = None) -> Item:
        at = entry.pop(ORDER, 0)
        return cls(entry["time"], entry, tally, at if isinstance(at, int) else 0)

    @property
    def key(self) -> tuple[str, int]:
        return self.time, self.at


@dataclass(slots=True)
class Stream:
    """One capped stream read newest first, a page at a time, at most `budget` entries."""

    store: Store
    key: str
    budget: int
    page: int
    wanted: AuditQuery
    read: int = 0
    before: str | None = None
    exhausted: bool = False
    ready: deque[Item] = field(default_factory=deque)

    async def _more(self) -> None:
        count = min(self.page, self.budget - self.read)
        if count <= 0:
            self.exhausted = True
            return
        page = await self.store.log_read(self.key, count, self.before)
        self.read += len(page)
        if len(page) < count:
            self.exhausted = True
        if page:
            self.before = page[-1][0]
        for _, value in page:
            self.take(value)

    def take(self, value: Any) -> None:
        if self.wanted.matches(value):
            self.ready.append(Item.of(value))

    async def peek(self) -> Item | None:
        while not self.ready and not self.exhausted:
            await self._more()
        return self.ready[0] if self.ready else None

    def pop(self) -> Item:
        return self.ready.popleft()


@dataclass(slots=True)
class CountedStream(Stream):
    """The counted stream: entries `{"event", "tally", "final", "written"}`, a final one
    replacing the provisional one of the same tally (read first: it was written later)."""

    frontier: str | None = None
    seen: set[str] = field(default_factory=set)
    waiting: list[Item] = field(default_factory=list)

    def take(self, value: Any) -> None:
        written = value["written"]
        if self.frontier is None or written < self.frontier:
            self.frontier = written
        tally = value["tally"]
        if tally in self.seen:
            return  # the provisional entry of an event already read final
        self.seen.add(tally)
        entry = value["event"]
        if self.wanted.matches(entry):
            live = None if value["final"] else tally
            self.waiting.append(Item.of(entry, live))

    async def peek(self) -> Item | None:
        while True:
            newest = max(self.waiting, key=lambda item: item.key, default=None)
            safe = newest is not None and (
                self.exhausted or self.frontier is None or newest.time >= self.frontier
            )
            if safe or self.exhausted:
                return newest
            await self._more()

    def pop(self) -> Item:
        newest = max(self.waiting, key=lambda item: item.key)
        self.waiting.remove(newest)
        return newest


async def merged(streams: list[Stream], limit: int) -> list[Item]:
    """The newest `limit` items of all `streams`, newest first."""
    found: list[Item] = []
    while len(found) < limit:
        best: Stream | None = None
        best_key = ("", 0)
        for stream in streams:
            head = await stream.peek()
            if head is not None and (best is None or head.key > best_key):
                best, best_key = stream, head.key
        if best is None:
            break
        found.append(best.pop())
        if len(found) % PAGE == 0:
            # A long merge on the memory store never yields on its own: let others run.
            await asyncio.sleep(0)
    return found
