"""The sender (OUTAGES.md 3): one worker at a time sends the queued notices.

Every worker runs this loop; the one holding the store lease `webhooks:sender` sends (it
renews the lease every RENEW_SECONDS; a worker that dies stops renewing, and another takes it
over within LEASE_SECONDS). A worker that finds the lease lost stops its sending at once.

While it holds the lease, each subscription has a lane of its own: a task that sends that
receiver's due notices one at a time, each attempt bounded by ATTEMPT_SECONDS. A receiver that
hangs or is down holds only its own lane: the other receivers' lanes, the publisher and every
API request go on (no request ever waits on a delivery). A 2xx answer is delivered; anything
else (another status, a refused connection, a timeout, a redirect) is retried on the
schedule (queue.py), under the same `webhook-id`, until it is dropped with an ERROR line and
an audit event. A subscription removed from the file loses its lane within a second or two,
an attempt in flight included.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

import httpx

from isp_gateway.kit import tasks
from isp_gateway.kit.errors import ServiceError, StoreUnavailable
from isp_gateway.kit.storage import LockTimeout
from isp_gateway.notices.signing import signed_headers
from isp_gateway.notices.subscriptions import http_addresses_problem

if TYPE_CHECKING:
    from isp_gateway.kit.recorder import Recorder
    from isp_gateway.kit.storage import Store
    from isp_gateway.notices.queue import Delivery, DeliveryQueue
    from isp_gateway.notices.subscriptions import Subscription, SubscriptionFile
    from isp_gateway.observability.metrics import Metrics

log = logging.getLogger("isp_gateway.notices")

LEASE_KEY = "webhooks:sender"
LEASE_SECONDS = 15.0
RENEW_SECONDS = 5.0
# How often a worker that does not send asks for the lease.
FOLLOW_SECONDS = 2.0
# How often the sender looks at the queues (a notice queued in this worker wakes it at once).
TICK_SECONDS = 0.5
# Each attempt, connection and answer included (OUTAGES.md 3).
ATTEMPT_SECONDS = 10.0


def build_webhook_client() -> httpx.AsyncClient:
    """The receivers' HTTP client (never the upstream's: another budget, other hosts). A
    redirect is not followed: it is no 2xx, so it is retried."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(ATTEMPT_SECONDS),
        follow_redirects=False,
        limits=httpx.Limits(max_connections=50, max_keepalive_connections=10),
    )


class Sender:
    def __init__(
        self,
        *,
        store: Store,
        queue: DeliveryQueue,
        subscriptions: SubscriptionFile,
        http: httpx.AsyncClient,
        audit: Recorder,
        metrics: Metrics | None = None,
    ) -> None:
        self.store, self.queue, self.subscriptions = store, queue, subscriptions
        self.http, self.audit, self.metrics = http, audit, metrics
        self.owner = uuid.uuid4().hex
        self.leading = False
        self._lanes: dict[str, asyncio.Task[None]] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._store_away = False  # said once while the store is away, not twice a second

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    def wake(self) -> None:
        """A notice was queued in this worker: look at the queues now."""
        self._wake.set()

    async def aclose(self) -> None:
        await tasks.stop(self._task)
        await self._stop_lanes()
        if self.leading:
            # Given up at once, so another worker need not wait for it to expire.
            with contextlib.suppress(StoreUnavailable):
                await self.store.lease(LEASE_KEY, self.owner, 0)
            self.leading = False

    # -- the loop --------------------------------------------------------------------------

    async def _run(self) -> None:
        renew_at = 0.0
        while True:
            now = time.monotonic()
            if now >= renew_at:
                await self._renew()
                renew_at = now + (RENEW_SECONDS if self.leading else FOLLOW_SECONDS)
            if self.leading:
                try:
                    await self._tick()
                    self._store_away = False
                except StoreUnavailable:
                    if not self._store_away:
                        log.warning("webhooks: the store is unavailable; sending resumes with it")
                    self._store_away = True
                except Exception:
                    log.exception("webhooks: the sender's look at the queues failed")
            pause = TICK_SECONDS if self.leading else max(0.0, renew_at - time.monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), pause)
            self._wake.clear()

    async def _renew(self) -> None:
        try:
            held = await self.store.lease(LEASE_KEY, self.owner, LEASE_SECONDS)
        except StoreUnavailable:
            held = False
        if held and not self.leading:
            log.info("webhooks: this worker sends the notices now")
        if not held and self.leading:
            log.warning("webhooks: the sender's lease was lost; another worker sends")
        if not held:
            await self._stop_lanes()
        self.leading = held

    async def _stop_lanes(self) -> None:
        lanes = list(self._lanes.values())
        self._lanes.clear()
        for lane in lanes:
            lane.cancel()
        await asyncio.gather(*lanes, return_exceptions=True)

    async def _tick(self) -> None:
        subscriptions = self.subscriptions.current()
        current = {s.id for s in subscriptions}
        for sub_id in [s for s in self._lanes if s not in current]:
            self._lanes.pop(sub_id).cancel()  # removed from the file: nothing more for it
        if not subscriptions:
            return
        pending = await self.queue.pending(sorted(current))
        now = time.time()
        for sub in subscriptions:
            lane = self._lanes.get(sub.id)
            if lane is not None and not lane.done():
                continue
            if any(float(item["due"]) <= now for item in pending.get(sub.id, ())):
                self._lanes[sub.id] = asyncio.create_task(self._lane(sub.id))

    # -- one receiver ----------------------------------------------------------------------

    async def _lane(self, sub_id: str) -> None:
        """Send one receiver's due notices, oldest first, one at a time."""
        try:
            while True:
                sub = self.subscriptions.by_id(sub_id)
                if sub is None:
                    return
                now = time.time()
                items = (await self.queue.pending([sub_id]))[sub_id]
                due = [item for item in items if float(item["due"]) <= now]
                if not due:
                    return
                item = min(due, key=lambda i: (float(i["queued_at"]), str(i["id"])))
                delivered, detail = await self.attempt(sub, item)
                await self._settled(sub, item, delivered, detail)
        except (StoreUnavailable, LockTimeout):
            log.warning("webhooks: the store is unavailable or busy; %s waits", sub_id)
        except Exception:
            log.exception("webhooks: the lane of %s failed", sub_id)

    async def attempt(self, sub: Subscription, item: Delivery) -> tuple[bool, str]:
        """One signed POST of the notice; (delivered, what happened)."""
        if sub.url.startswith("http://"):
            problem = await asyncio.to_thread(http_addresses_problem, sub.url)
            if problem is not None:
                return False, problem
        body = await self.queue.body(str(item["id"]))
        if body is None:
            return False, "its text expired from the store"
        headers = signed_headers(sub.secret, str(item["id"]), body)
        try:
            async with (
                asyncio.timeout(ATTEMPT_SECONDS),
                self.http.stream("POST", sub.url, content=body.encode(), headers=headers) as answer,
            ):
                # The answer's body is not read: only its status counts.
                status = answer.status_code
        except TimeoutError:
            return False, f"no answer within {ATTEMPT_SECONDS:.0f} s"
        except httpx.HTTPError as exc:
            return False, type(exc).__name__
        return 200 <= status < 300, f"HTTP {status}"

    async def _settled(self, sub: Subscription, item: Delivery, delivered: bool, what: str) -> None:
        outcome, kept = await self.queue.settle(sub.id, str(item["id"]), delivered)
        if kept is None:
            return
        if self.metrics is not None:
            self.metrics.webhook(outcome)
        attempts = int(kept["attempts"]) + (1 if delivered else 0)
        if outcome == "delivered":
            log.info(
                "webhook %s: %s %s delivered (%s, attempt %d)",
                sub.name,
                kept["type"],
                kept["id"],
                what,
                attempts,
            )
        elif outcome == "failed":
            log.warning(
                "webhook %s: %s %s attempt %d failed (%s); next in %.0f s",
                sub.name,
                kept["type"],
                kept["id"],
                attempts,
                what,
                max(0.0, float(kept["due"]) - time.time()),
            )
        else:
            await report_dropped(self.audit, sub.name, kept, what)


async def report_dropped(audit: Recorder, name: str, item: Delivery, why: str) -> None:
    """A notice given up: an ERROR line and an audit event (`webhook`, `dropped`)."""
    log.error(
        "webhook %s: %s %s dropped after %d attempts (last: %s)",
        name,
        item["type"],
        item["id"],
        int(item["attempts"]),
        why,
    )
    details: dict[str, Any] = {
        "webhook": name,
        "event_type": item["type"],
        "attempts": int(item["attempts"]),
        "reason": why,
    }
    try:
        await audit.record("webhook", "dropped", details=details)
    except ServiceError as exc:
        log.warning("webhook %s: audit event not stored (%s)", name, exc.action)
