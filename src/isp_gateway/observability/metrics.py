"""Prometheus metrics (BEYOND.md "Operating endpoints"): the metric set, the request
middleware and `GET /metrics`.

Labels carry route templates and fixed words only, never a raw path, document or phone.
Outcomes are counted where they are decided or rendered: request and throttle outcomes from
the response in `MetricsMiddleware`; ticket creations by the ticket service (`Metrics.ticket`);
upstream calls in the gateway; stale copies where the cache serves them. Gauges that describe
shared state (budget left, cache age) are read from the store when scraped, so they are right
whichever worker answers.

Extending it: add a metric in `Metrics.__init__` (with `registry=self.registry`), and for a
value best read at scrape time register an async callback with `on_scrape`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
from bisect import bisect_left
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

from isp_gateway.kit import tasks
from isp_gateway.kit.actions import Action
from isp_gateway.kit.errors import StoreUnavailable
from isp_gateway.observability.workers import multiprocess_dir

if TYPE_CHECKING:
    from isp_gateway.kit.warm import Watched
    from isp_gateway.upstream.budget import RateBudget
    from isp_gateway.upstream.planner import RefreshPlanner

log = logging.getLogger("isp_gateway.metrics")


# Lookups answer in about a millisecond; upstream calls take up to the upstream timeout.
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
UPSTREAM_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# Request counts are added up in plain Python and handed to prometheus-client this often
# (and before each scrape): its per-call locking cost more than a fast-path lookup's share.
FLUSH_SECONDS = 1.0
# The outcomes of a ticket creation, as the ticket service decides them.
TICKET_OUTCOMES = (
    "created", "duplicate", "failed", "zone_limit", Action.ZONE_MISMATCH, Action.OUTAGE_IN_PROGRESS
)  # fmt: skip
# A 429 from a route is that route's failure throttle; one answered before routing is the
# service's own rate limit (RateLimitMiddleware).
THROTTLE_KINDS = {
    "/api/v1/auth/token": "login",
    "/api/v1/clients/{service_id}/verify": "verify",
    "/api/v1/clients/resolve": "resolve",
}
RATE_LIMIT = "rate_limit"
# A webhook attempt's outcome: delivered, failed (retried later), dropped (given up).
WEBHOOK_OUTCOMES = ("delivered", "failed", "dropped")


class Backlog(Protocol):
    """The webhook queue (notices/service.py): how many wait, the oldest's age, from the store."""

    async def backlog(self) -> tuple[int, float]: ...


# Upstream path segments that name one object (ids, task ids) become `{id}`.
_ID_SEGMENT = re.compile(r"^(?=.*\d)[^/]+$|^[^/]{33,}$")


def upstream_endpoint(method: str, path: str) -> str:
    """`GET /api/clientes/{id}/perfil/` for `api/clientes/17/perfil/`: the label of a call."""
    parts = ["{id}" if _ID_SEGMENT.match(p) else p for p in path.strip("/").split("/")]
    return f"{method} /{'/'.join(parts)}/"


def resource_label(key: str) -> str:
    """A cached resource's label: its name up to two parts (`plans:detail:pppoe:3` counts
    as `plans:detail`), so one label per kind of list however many items it holds."""
    return ":".join(key.split(":")[:2])


class Metrics:
    """One app's metrics. Each instance has its own registry (tests run several apps in
    one process); in multiprocess mode the samples also go to the shared directory."""

    def __init__(self) -> None:
        self.directory = multiprocess_dir()
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "isp_gateway_requests",
            "HTTP requests answered, by route template, method and status",
            ["route", "method", "status"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "isp_gateway_request_duration_seconds",
            "Time to answer a request, by route template",
            ["route"],
            buckets=REQUEST_BUCKETS,
            registry=r,
        )
        self.upstream_requests = Counter(
            "isp_gateway_upstream_requests",
            "Calls to the upstream, by endpoint template and outcome",
            ["endpoint", "outcome"],
            registry=r,
        )
        self.upstream_seconds = Histogram(
            "isp_gateway_upstream_request_duration_seconds",
            "Duration of upstream calls, by endpoint template",
            ["endpoint"],
            buckets=UPSTREAM_BUCKETS,
            registry=r,
        )
        # `mostrecent`: the value the last writer (the worker answering the scrape) set.
        self.budget_remaining = Gauge(
            "isp_gateway_upstream_budget_remaining",
            "Upstream calls left in the current rate window",
            ["window"],
            multiprocess_mode="mostrecent",
            registry=r,
        )
        self.budget_limit = Gauge(
            "isp_gateway_upstream_budget_limit",
            "Upstream calls allowed per rate window",
            ["window"],
            multiprocess_mode="mostrecent",
            registry=r,
        )
        self.cache_age = Gauge(
            "isp_gateway_cache_age_seconds",
            "Age of the cached copy of an upstream list (the oldest of its kind)",
            ["resource"],
            multiprocess_mode="mostrecent",
            registry=r,
        )
        self.refresh_interval = Gauge(
            "isp_gateway_refresh_interval_seconds",
            "Seconds between refreshes of an upstream list, as the budget planner set them",
            ["resource"],
            multiprocess_mode="mostrecent",
            registry=r,
        )
        self.stale_served = Counter(
            "isp_gateway_stale_served",
            "Answers served from a cached copy past its freshness (stale-if-error)",
            ["resource"],
            registry=r,
        )
        self.tickets = Counter(
            "isp_gateway_tickets",
            "Ticket creations, by outcome",
            ["outcome"],
            registry=r,
        )
        self.throttled = Counter(
            "isp_gateway_throttled",
            "Requests refused by a throttle (login, verify, resolve, rate_limit)",
            ["kind"],
            registry=r,
        )
        self.webhook_deliveries = Counter(
            "isp_gateway_webhook_deliveries",
            "Webhook delivery attempts, by outcome (delivered, failed and retried, dropped)",
            ["outcome"],
            registry=r,
        )
        self.webhook_queue_age = Gauge(
            "isp_gateway_webhook_queue_age_seconds",
            "Age of the oldest webhook notice waiting to be delivered (0 when none waits)",
            multiprocess_mode="mostrecent",
            registry=r,
        )
        self.webhook_queued = Gauge(
            "isp_gateway_webhook_queued",
            "Webhook notices waiting to be delivered, every receiver's",
            multiprocess_mode="mostrecent",
            registry=r,
        )
        # Zero series from the start, so rates and alerts have something to read.
        for outcome in WEBHOOK_OUTCOMES:
            self.webhook_deliveries.labels(outcome)
        for outcome in TICKET_OUTCOMES:
            self.tickets.labels(outcome)
        for kind in (*THROTTLE_KINDS.values(), RATE_LIMIT):
            self.throttled.labels(kind)
        # (route, method, status) -> [count, seconds, per-bucket counts], not yet flushed.
        self._pending: dict[tuple[str, str, int], list[Any]] = {}
        self._flusher: asyncio.Task[None] | None = None
        self._caches: list[Watched] = []
        self._last_loaded: dict[str, float] = {}  # each list's newest load time seen
        self._budgets: list[RateBudget] = []
        self._planners: list[RefreshPlanner] = []
        self._backlogs: list[Backlog] = []

    # -- recording -------------------------------------------------------------------

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        """The hot path: a few operations on plain Python values (see `flush`)."""
        key = (route, method, status)
        pending = self._pending.get(key)
        if pending is None:
            pending = self._pending[key] = [0, 0.0, [0] * (len(REQUEST_BUCKETS) + 1)]
        pending[0] += 1
        pending[1] += seconds
        # Prometheus buckets are `le`: the first bound >= the value (the last one is +Inf).
        pending[2][bisect_left(REQUEST_BUCKETS, seconds)] += 1

    def flush(self) -> None:
        """Hand the requests counted since the last flush to prometheus-client (in
        multiprocess mode: to this process's files, where any worker's scrape reads them)."""
        pending, self._pending = self._pending, {}
        for (route, method, status), (count, seconds, buckets) in pending.items():
            self.requests.labels(route, method, str(status)).inc(count)
            histogram = self.request_seconds.labels(route)
            # prometheus-client has no bulk observe; these are the values `observe` adds to.
            histogram._sum.inc(seconds)
            for index, hits in enumerate(buckets):
                if hits:
                    histogram._buckets[index].inc(hits)

    async def start(self) -> None:
        """Start the periodic flush (lifespan)."""

        async def run() -> None:
            while True:
                await asyncio.sleep(FLUSH_SECONDS)
                self.flush()

        self._flusher = asyncio.create_task(run())

    def observe_upstream(self, method: str, path: str, outcome: str, seconds: float) -> None:
        endpoint = upstream_endpoint(method, path)
        self.upstream_requests.labels(endpoint, outcome).inc()
        self.upstream_seconds.labels(endpoint).observe(seconds)

    def stale(self, key: str) -> None:
        self.stale_served.labels(resource_label(key)).inc()

    def ticket(self, outcome: str) -> None:
        """One ticket creation's outcome (one of TICKET_OUTCOMES), where it is decided."""
        if outcome in TICKET_OUTCOMES:
            self.tickets.labels(outcome).inc()

    def throttle(self, kind: str) -> None:
        self.throttled.labels(kind).inc()

    def webhook(self, outcome: str) -> None:
        """One webhook attempt's outcome (one of WEBHOOK_OUTCOMES), where it is settled."""
        if outcome in WEBHOOK_OUTCOMES:
            self.webhook_deliveries.labels(outcome).inc()

    # -- values read when scraped ------------------------------------------------------

    def watch_cache(self, resource: Watched) -> None:
        self._caches.append(resource)

    def watch_budget(self, budget: RateBudget) -> None:
        self._budgets.append(budget)

    def watch_planner(self, planner: RefreshPlanner) -> None:
        self._planners.append(planner)

    def watch_webhooks(self, backlog: Backlog) -> None:
        self._backlogs.append(backlog)

    async def _update_gauges(self) -> None:
        now = time.time()
        ages: dict[str, float] = {}
        for resource in self._caches:
            at = await resource.loaded_at()
            if at is None:
                # A copy gone from the store (past its lifetime and stale window, no load
                # since succeeded) goes on ageing from the last one seen: a list that can no
                # longer be read shows here instead of keeping its last age.
                at = self._last_loaded.get(resource.name)
            else:
                self._last_loaded[resource.name] = at
            if at is not None:
                label = resource_label(resource.name)
                ages[label] = max(ages.get(label, 0.0), now - at)
        for label, age in ages.items():
            self.cache_age.labels(label).set(age)
        for budget in self._budgets:
            for window, (remaining, limit) in (await budget.remaining()).items():
                self.budget_remaining.labels(window).set(remaining)
                self.budget_limit.labels(window).set(limit)
        for planner in self._planners:
            for name, seconds in planner.refresh_intervals().items():
                self.refresh_interval.labels(resource_label(name)).set(seconds)
        for backlog in self._backlogs:
            queued, age = await backlog.backlog()
            self.webhook_queued.set(queued)
            self.webhook_queue_age.set(age)

    async def render(self) -> bytes:
        self.flush()
        for hook in (self._update_gauges,):
            try:
                await hook()
            except StoreUnavailable:
                # The scrape still answers (with the last values) while the store is away.
                log.warning("metrics: the store is unavailable; shared gauges not updated")
        if self.directory is None:
            return generate_latest(self.registry)
        # Every worker's samples, summed, from the shared directory (a fresh registry each
        # time, as the client's documentation prescribes).
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=self.directory)  # type: ignore[no-untyped-call]
        return generate_latest(registry)

    async def aclose(self) -> None:
        """At this app's end: flush, and in multiprocess mode do the client's bookkeeping for
        a process that ends (its live gauges leave the sums)."""
        await tasks.stop(self._flusher)
        self.flush()
        if self.directory is not None:
            multiprocess.mark_process_dead(os.getpid(), self.directory)  # type: ignore[no-untyped-call]
