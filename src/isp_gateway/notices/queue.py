"""The delivery queue (OUTAGES.md 3): one queue per subscription, in the store.

Each subscription's queue is one small store value, `webhooks:queue:<subscription id>`, a
list of deliveries in the order they were queued:

    {"id": "msg_r2-1764103267_started", "type": "outage.started",
     "queued_at": 1764103267.2, "attempts": 0, "due": 1764103267.2}

and each notice's body is stored once for all its subscriptions, `webhooks:body:<id>`: the
exact text that is signed, so every retry sends the same bytes under the same `webhook-id`
(and the sender, which looks at the queues twice a second, never reads the bodies of notices
that are not due). In Redis both outlive a restart of every worker (at least once: a notice
queued before a restart is sent after it); in memory (no Redis) they live as long as the
process. Queue changes are read-modify-writes under the store lock of that queue (the
publisher and the sender may be two workers). Both expire WEBHOOKS_GIVE_UP_SECONDS + an hour
after their last write, so the queue of a subscription removed while the service was down
does not stay for ever.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from isp_gateway.kit.storage import Store

# A receiver down for a day behind a busy network could collect many notices: past this many
# waiting, the oldest is dropped (reported like a notice that ran out of retries).
MAX_QUEUED = 1000
LOCK_SECONDS = 10.0
LOCK_WAIT_SECONDS = 5.0

Delivery = dict[str, Any]


@dataclass(frozen=True, slots=True)
class RetrySchedule:
    """How long after each failed attempt the next one comes, and when to give up."""

    delays: tuple[float, ...]
    give_up: float

    def next_due(self, delivery: Delivery, now: float) -> float | None:
        """When to try again after the delivery's latest failed attempt (its `attempts`
        counts it), or None when that would be past the give-up time: drop it."""
        index = min(int(delivery["attempts"]), len(self.delays)) - 1
        due = now + self.delays[max(0, index)]
        return None if due - float(delivery["queued_at"]) > self.give_up else due


def queue_key(sub_id: str) -> str:
    return f"webhooks:queue:{sub_id}"


def body_key(msg_id: str) -> str:
    return f"webhooks:body:{msg_id}"


class DeliveryQueue:
    def __init__(self, store: Store, schedule: RetrySchedule) -> None:
        self.store = store
        self.schedule = schedule
        self.ttl = schedule.give_up + 3600

    def _lock(self, sub_id: str) -> Any:
        return self.store.lock(
            queue_key(sub_id), timeout=LOCK_SECONDS, blocking_timeout=LOCK_WAIT_SECONDS
        )

    async def _read(self, sub_id: str) -> list[Delivery]:
        raw = await self.store.get(queue_key(sub_id))
        return list(raw) if isinstance(raw, list) else []

    async def _write(self, sub_id: str, items: list[Delivery]) -> None:
        if items:
            await self.store.set(queue_key(sub_id), items, ttl=self.ttl)
        else:
            await self.store.delete(queue_key(sub_id))

    async def add(
        self, sub_id: str, msg_id: str, event_type: str, body: str, now: float | None = None
    ) -> list[Delivery]:
        """Queue one notice for a subscription (once: a notice already queued under that id
        is not queued again). Returns the deliveries pushed out by MAX_QUEUED."""
        at = time.time() if now is None else now
        await self.store.set(body_key(msg_id), body, ttl=self.ttl)
        async with self._lock(sub_id):
            items = await self._read(sub_id)
            if any(item["id"] == msg_id for item in items):
                return []
            items.append(
                {
                    "id": msg_id,
                    "type": event_type,
                    "queued_at": at,
                    "attempts": 0,
                    "due": at,
                }
            )
            pushed_out = items[:-MAX_QUEUED] if len(items) > MAX_QUEUED else []
            await self._write(sub_id, items[len(pushed_out) :])
        return pushed_out

    async def body(self, msg_id: str) -> str | None:
        """The notice's text as signed; None once it has expired."""
        text = await self.store.get(body_key(msg_id))
        return text if isinstance(text, str) else None

    async def pending(self, sub_ids: list[str]) -> dict[str, list[Delivery]]:
        """Every subscription's waiting deliveries, in one store round trip."""
        raws = await self.store.get_many([queue_key(s) for s in sub_ids])
        pairs = zip(sub_ids, raws, strict=True)
        return {s: list(raw) if isinstance(raw, list) else [] for s, raw in pairs}

    async def settle(
        self, sub_id: str, msg_id: str, delivered: bool, now: float | None = None
    ) -> tuple[str, Delivery | None]:
        """Record one attempt's outcome: ("delivered", ...) removes it; ("failed", ...) sets
        its next attempt; ("dropped", ...) removes it past the give-up time; ("gone", None)
        when it is no longer queued (another sender settled it)."""
        at = time.time() if now is None else now
        async with self._lock(sub_id):
            items = await self._read(sub_id)
            found = next((item for item in items if item["id"] == msg_id), None)
            if found is None:
                return "gone", None
            if delivered:
                items.remove(found)
                outcome = "delivered"
            else:
                found["attempts"] = int(found["attempts"]) + 1
                due = self.schedule.next_due(found, at)
                if due is None:
                    items.remove(found)
                    outcome = "dropped"
                else:
                    found["due"] = due
                    outcome = "failed"
            await self._write(sub_id, items)
        return outcome, found

    async def oldest(self, sub_ids: list[str], now: float | None = None) -> tuple[int, float]:
        """How many deliveries wait in all, and the age of the oldest (0 when none)."""
        at = time.time() if now is None else now
        queued = [item for items in (await self.pending(sub_ids)).values() for item in items]
        if not queued:
            return 0, 0.0
        return len(queued), max(0.0, at - min(float(i["queued_at"]) for i in queued))
