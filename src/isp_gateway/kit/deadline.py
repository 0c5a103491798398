"""The request's deadline: every answer comes within UPSTREAM_TIMEOUT_SECONDS + 2 s.

A request sets its deadline when it starts (`start`, in the request middleware,
web/middleware.py); a route that first reads a large body from its sender (a payment
report's receipt) counts it again from the body's last byte (`restart`). A request that
waits on work it does not own (a whole-list load shared with other requests and the
background schedule, which may be paused for the budget or a Retry-After, or held by
another worker's lock) waits only while time is left (`bounded`):
past it, or at once when the upstream asked us to wait longer than the time left, it answers
with the upstream's failure while the load goes on for the next caller. Background work has
no deadline (`clear`).

The store has its own budget (CALLERS.md 6 "One deadline for the store"): all the store calls
of one request share REDIS_TIMEOUT_SECONDS of waiting (`StoreBudget`, read by
store/redis.py), so a frozen Redis costs a request one timeout, not one per call.
"""

from __future__ import annotations

import asyncio
import time
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from isp_gateway.kit.errors import UpstreamRateLimited, UpstreamUnavailable

T = TypeVar("T")


class RateLimitView(Protocol):
    """What a waiting request reads of the upstream gateway: how long the upstream asked us
    to wait (its Retry-After), 0 when it did not."""

    def rate_limited_for(self) -> float: ...

    async def background_wait(self) -> float:
        """How long background work waits for the upstream budget now (0 when it may go)."""
        ...


# How often a waiting request looks again at a Retry-After the upstream sent meanwhile.
POLL_SECONDS = 0.2


@dataclass
class StoreBudget:
    """The seconds one request may still wait on the store, its store calls together: each
    call waits at most what is left, and what it waited is taken off."""

    left: float

    def spend(self, seconds: float) -> None:
        self.left -= seconds


@dataclass(frozen=True)
class Deadline:
    at: float  # time.monotonic()
    gateway: RateLimitView | None = None
    store: StoreBudget | None = None
    seconds: float = 0.0  # the span it was started with (restart)

    def left(self) -> float:
        return self.at - time.monotonic()


_deadline: ContextVar[Deadline | None] = ContextVar("request_deadline", default=None)


def start(
    seconds: float, gateway: RateLimitView | None = None, store: StoreBudget | None = None
) -> None:
    """This request answers within `seconds` from now, and waits on the store at most
    `store` (None: each store call its own timeout). Set afresh each time: a context that
    outlived its request (a server reusing one for the next) never hands its expired
    deadline on."""
    _deadline.set(Deadline(time.monotonic() + seconds, gateway, store, seconds))


def restart() -> None:
    """The request's deadline counted again from now, its span and store budget kept: for a
    route that reads a large body first (a payment report's receipt), whose sender's
    connection, not the backend or the store, decided how long that took. No deadline: none."""
    current = _deadline.get()
    if current is not None:
        _deadline.set(replace(current, at=time.monotonic() + current.seconds))


def adopt(deadline: Deadline | None) -> None:
    """Carry a request's deadline into work done for it in another context (the MCP SDK
    runs a tool call in a task of its own, which does not inherit the request's context)."""
    _deadline.set(deadline)


def clear() -> None:
    """No deadline in this context (a background task started from a request)."""
    _deadline.set(None)


def current() -> Deadline | None:
    return _deadline.get()


def store_budget() -> StoreBudget | None:
    """The store budget of the request this context serves, if any."""
    deadline = _deadline.get()
    return None if deadline is None else deadline.store


async def bounded(task: asyncio.Future[T], *, background: bool = False) -> T:
    """The result of shared work `task`, waited for only while the request has time left.

    The task is never cancelled here (others may wait for it). Raises UpstreamRateLimited
    at once when the upstream's Retry-After outlasts the time left, else UpstreamUnavailable
    when the time is up. `background`: the work spends the background part of the upstream
    budget (a refresh, a large list), so it may be held by the budget itself, in this worker
    or in another one holding the load's lock: the budget is asked (once when the wait
    begins, once when the time is up) and a spent one answers UpstreamRateLimited with the
    wait for it, never "the backend is not available"."""
    deadline = _deadline.get()
    if deadline is None:
        return await asyncio.shield(task)
    asked_budget = False
    while True:
        left = deadline.left()
        # Waited first: a load that is under way clears an older Retry-After with its
        # first successful page.
        await asyncio.wait({task}, timeout=max(0.0, min(left, POLL_SECONDS)))
        if task.done():
            return task.result()
        left = deadline.left()
        gateway = deadline.gateway
        wait = 0.0 if gateway is None else gateway.rate_limited_for()
        if background and gateway is not None and (not asked_budget or left <= 0):
            asked_budget = True
            wait = max(wait, await gateway.background_wait())
        if wait > max(0.0, left):
            raise UpstreamRateLimited(wait)
        if left <= 0:
            raise UpstreamUnavailable()
