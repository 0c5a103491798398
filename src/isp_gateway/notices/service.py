"""Signed, retried webhooks (OUTAGES.md 1-3) as the features see them: `publish` a notice,
and it reaches every subscription that asked for its type, at least once.

The rooms: subscriptions.py (WEBHOOKS_FILE), queue.py (the queue in the store and the retry
schedule), sender.py (one worker at a time sends), signing.py (Standard Webhooks). Without
WEBHOOKS_FILE notices are off: `publish` queues nothing and no sender runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from isp_gateway.notices.queue import DeliveryQueue, RetrySchedule
from isp_gateway.notices.sender import Sender, report_dropped
from isp_gateway.notices.subscriptions import SubscriptionFile

if TYPE_CHECKING:
    import httpx

    from isp_gateway.kit.recorder import Recorder
    from isp_gateway.kit.storage import Store
    from isp_gateway.observability.metrics import Metrics
    from isp_gateway.settings import Settings


class Notices:
    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        http: httpx.AsyncClient,
        audit: Recorder,
        metrics: Metrics | None = None,
    ) -> None:
        self.audit = audit
        self.subscriptions = SubscriptionFile(
            settings.WEBHOOKS_FILE, allow_http=settings.WEBHOOKS_ALLOW_HTTP
        )
        schedule = RetrySchedule(
            tuple(settings.WEBHOOKS_RETRY_SECONDS), settings.WEBHOOKS_GIVE_UP_SECONDS
        )
        self.queue = DeliveryQueue(store, schedule)
        self.sender = Sender(
            store=store,
            queue=self.queue,
            subscriptions=self.subscriptions,
            http=http,
            audit=audit,
            metrics=metrics,
        )
        if metrics is not None and self.enabled:
            metrics.watch_webhooks(self)

    @property
    def enabled(self) -> bool:
        return self.subscriptions.enabled

    async def start(self) -> None:
        if self.enabled:
            self.sender.start()

    async def aclose(self) -> None:
        await self.sender.aclose()

    async def publish(self, event_type: str, msg_id: str, body: str) -> int:
        """Queue one notice (the exact body to sign) for every subscription that wants its
        type; how many it was queued for. Queued again under the same id, nothing changes."""
        count = 0
        for sub in self.subscriptions.current():
            if not sub.wants(event_type):
                continue
            for pushed_out in await self.queue.add(sub.id, msg_id, event_type, body):
                await report_dropped(self.audit, sub.name, pushed_out, "the queue was full")
            count += 1
        if count:
            self.sender.wake()
        return count

    async def backlog(self) -> tuple[int, float]:
        """How many notices wait, and how long the oldest has waited (the metrics' gauges)."""
        return await self.queue.oldest([s.id for s in self.subscriptions.current()])
