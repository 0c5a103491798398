"""One plan for every whole upstream list kept warm: how often each may be refreshed.

A refresh of a list of P pages costs P upstream calls. The background share of the budget
(what `UPSTREAM_INTERACTIVE_RESERVE` leaves, in the tighter of the minute and the hour) is
split among the lists max-min fairly: a list that needs less than an equal share gets what
it needs at its configured lifetime; the lists that need more share the rest equally, so a
200,000-client list is refreshed less often than its lifetime asks, and a one-page plan
catalogue is not slowed down for it. A configured lifetime is a lower bound, never shortened.

Each `CachedResource` given the planner registers itself (its store name and configured
lifetime) and reports the upstream calls of each load; its lifetime and refresh point then
come from `lifetime()` and `refresh_every()`. `plan()` is the whole plan, for logs and
metrics (e.g. a gauge `isp_gateway_refresh_interval_seconds{resource}`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from isp_gateway.kit.cache import DEFAULT_REFRESH_RATIO
from isp_gateway.upstream.budget import BUCKETS, RateBudget

log = logging.getLogger("isp_gateway.planner")


@dataclass(frozen=True)
class PlannedRefresh:
    resource: str
    pages: int  # upstream calls of the last load (1 until measured)
    configured: float  # configured lifetime, seconds: the lower bound
    lifetime: float  # planned lifetime: served as fresh up to this age
    refresh_every: float  # seconds between loads (a refresh starts at this age)
    calls_per_hour: float  # what keeping it fresh costs
    fastest_load: float  # seconds one load takes at least within the background share

    @property
    def stretched(self) -> bool:
        return self.lifetime > self.configured * 1.001


@dataclass
class _Entry:
    configured: float
    ratio: float
    pages: int = 1
    measured: bool = False


class RefreshPlanner:
    def __init__(self, budget: RateBudget) -> None:
        self.budget = budget
        self._entries: dict[str, _Entry] = {}
        self._plan: dict[str, PlannedRefresh] = {}

    # -- what resources call ---------------------------------------------------------

    def register(
        self, resource: str, lifetime: float, *, refresh_ratio: float = DEFAULT_REFRESH_RATIO
    ) -> None:
        """A list kept warm, with its configured lifetime (the lower bound)."""
        self._entries[resource] = _Entry(float(lifetime), refresh_ratio)
        self._replan()

    def measured(self, resource: str, pages: int) -> None:
        """The upstream calls one load of `resource` took; logs the plan when it changes."""
        entry = self._entries.get(resource)
        if entry is None:
            return
        pages = max(1, pages)
        if entry.measured and entry.pages == pages:
            return
        first = not entry.measured
        entry.pages, entry.measured = pages, True
        before = self._plan
        self._replan()
        changed = [
            name
            for name, new in self._plan.items()
            if name not in before or not math.isclose(before[name].lifetime, new.lifetime)
        ]
        if first or changed:
            # The whole plan at DEBUG; at INFO only a list the budget cannot refresh as
            # configured, in a line of its own (issue 28: six lines of ~700 characters at
            # every start-up, one a list measured, said nothing an operator acts on).
            self._log_details(f"{resource} measured at {pages} pages")
            if self._plan[resource].stretched:
                log.info("refresh plan: %s", self._describe(self._plan[resource]))
            self._warn_if_stretched(resource)

    def load_allowance(self, resource: str) -> float:
        """Seconds a load of `resource` may take within the background share: from its
        measured size, or, before the first load, from the most pages an hour allows."""
        entry = self._entries.get(resource)
        if entry is not None and entry.measured:
            return self.fastest_load(entry.pages)
        return self.fastest_load(self.budget.background_share(self.budget.windows[1]))

    def is_large(self, resource: str) -> bool:
        """A list whose load would take a good part of a minute's interactive reserve: its
        loads always spend background budget, even when a request waits for one (a cold
        400-page load must not use up the calls kept for tickets and lookups)."""
        entry = self._entries.get(resource)
        if entry is None:
            return False
        minute = self.budget.windows[0]
        return entry.pages > max(1, self.budget.reserved(minute) // 3)

    def lifetime(self, resource: str) -> float:
        return self._plan[resource].lifetime

    def refresh_every(self, resource: str) -> float:
        return self._plan[resource].refresh_every

    def plan(self) -> dict[str, PlannedRefresh]:
        """The current plan by resource (for logs and metrics)."""
        return dict(self._plan)

    def refresh_intervals(self) -> dict[str, float]:
        """Seconds between refreshes by resource: the value of a gauge such as
        `isp_gateway_refresh_interval_seconds{resource}`."""
        return {name: p.refresh_every for name, p in self._plan.items()}

    def log_plan(self, reason: str) -> None:
        """One short INFO line (how many lists, within what share of the budget); each list's
        plan at DEBUG."""
        stretched = [p.resource for p in self._plan.values() if p.stretched]
        log.info(
            "refresh plan (%s): %d lists kept warm within %.0f background upstream calls/h of "
            "%d%s; each list's plan at DEBUG",
            reason,
            len(self._plan),
            self.capacity() * 3600,
            self.budget.windows[1].limit,
            f", refreshed less often than configured: {', '.join(stretched)}" if stretched else "",
        )
        self._log_details(reason)

    @staticmethod
    def _describe(p: PlannedRefresh) -> str:
        return (
            f"{p.resource}: {p.pages} pages every {p.refresh_every:.0f}s "
            f"(lifetime {p.lifetime:.0f}s, configured {p.configured:.0f}s, "
            f"{p.calls_per_hour:.0f} calls/h)"
        )

    def _log_details(self, reason: str) -> None:
        if not log.isEnabledFor(logging.DEBUG):
            return
        log.debug(
            "refresh plan (%s; %.0f background calls/h of %d): %s",
            reason,
            self.capacity() * 3600,
            self.budget.windows[1].limit,
            "; ".join(self._describe(p) for p in self._plan.values()) or "nothing registered",
        )

    def _warn_if_stretched(self, resource: str) -> None:
        p = self._plan[resource]
        if p.stretched:
            log.warning(
                "%s: %d pages cannot be refreshed every %.0fs within the upstream budget; "
                "planned lifetime %.0fs (raise UPSTREAM_PAGE_SIZE if the backend allows)",
                p.resource,
                p.pages,
                p.configured * self._entries[resource].ratio,
                p.lifetime,
            )

    # -- the plan --------------------------------------------------------------------

    def capacity(self) -> float:
        """Background calls per second, in the tighter window. The budget admits a window's
        limit per window and a bucket (see budget.py), hence the factor."""
        spread = (BUCKETS + 1) / BUCKETS
        return min(
            self.budget.background_share(w) / (w.length * spread) for w in self.budget.windows
        )

    def fastest_load(self, pages: int) -> float:
        """Seconds a load of `pages` takes at least within the background share of a minute
        (the first window's share is spent at once, then one window per share)."""
        minute = self.budget.windows[0]
        share = max(1, self.budget.background_share(minute))
        return max(0.0, (pages - share) / share) * minute.length * (BUCKETS + 1) / BUCKETS

    def _replan(self) -> None:
        capacity = self.capacity()
        # Calls per second each list asks for at its configured lifetime.
        demand = {name: e.pages / (e.configured * e.ratio) for name, e in self._entries.items()}
        level = _water_level(list(demand.values()), capacity)
        plan: dict[str, PlannedRefresh] = {}
        for name, entry in self._entries.items():
            rate = min(demand[name], level)
            refresh_every = max(entry.configured * entry.ratio, entry.pages / rate)
            plan[name] = PlannedRefresh(
                resource=name,
                pages=entry.pages,
                configured=entry.configured,
                lifetime=refresh_every / entry.ratio,
                refresh_every=refresh_every,
                calls_per_hour=entry.pages * 3600 / refresh_every,
                fastest_load=self.fastest_load(entry.pages),
            )
        self._plan = plan


def _water_level(demands: list[float], capacity: float) -> float:
    """The largest rate cap x with sum(min(d, x)) <= capacity (infinite when all fit)."""
    if sum(demands) <= capacity:
        return math.inf
    left = capacity
    ordered = sorted(demands)
    for i, demand in enumerate(ordered):
        share = left / (len(ordered) - i)
        if demand > share:
            return share
        left -= demand
    return math.inf
