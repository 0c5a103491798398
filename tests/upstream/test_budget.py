"""The upstream rate budget: both windows, refusals cost nothing, background keeps a share."""

from __future__ import annotations

import asyncio

import pytest

from isp_gateway.kit.callers import Caller, set_current_caller
from isp_gateway.kit.errors import UpstreamRateLimited
from isp_gateway.store import MemoryStore
from isp_gateway.upstream.budget import RateBudget
from tests.support import wait_for_fresh_window

pytestmark = pytest.mark.anyio


async def refusal_after(budget: RateBudget, calls: int) -> UpstreamRateLimited:
    """Spend `calls` calls of `budget`; the refusal of the next one."""
    for _ in range(calls):
        await budget.acquire()
    with pytest.raises(UpstreamRateLimited) as caught:
        await budget.acquire()
    return caught.value


async def test_user_calls_refused_when_the_minute_is_spent() -> None:
    wait_for_fresh_window(60)
    refused = await refusal_after(RateBudget(MemoryStore(), per_minute=5, per_hour=1000), 5)
    assert 0 < refused.retry_after <= 60
    assert refused.status_code == 503
    assert 1 <= int(refused.headers["Retry-After"]) <= 60


async def test_hour_window_counts_too() -> None:
    wait_for_fresh_window(3600)
    refused = await refusal_after(RateBudget(MemoryStore(), per_minute=100, per_hour=3), 3)
    assert 0 < refused.retry_after <= 3600


async def test_a_refused_call_costs_nothing() -> None:
    wait_for_fresh_window(60)
    store = MemoryStore()
    # The minute has room, the hour does not: the minute's unit must be given back.
    budget = RateBudget(store, per_minute=10, per_hour=2)
    await budget.acquire()
    await budget.acquire()
    for _ in range(5):
        with pytest.raises(UpstreamRateLimited):
            await budget.acquire()
    roomy = RateBudget(store, per_minute=10, per_hour=100)
    # 2 spent + 8 = the minute's 10, refusals did not eat into it
    await refusal_after(roomy, 8)


async def test_user_may_wait_up_to_max_wait() -> None:
    wait_for_fresh_window(60)
    budget = RateBudget(MemoryStore(), per_minute=1, per_hour=100)
    await budget.acquire()
    with pytest.raises(UpstreamRateLimited):
        await budget.acquire(max_wait=0.5)  # the window ends later than that


async def test_background_stops_at_its_share_and_leaves_the_rest_to_users() -> None:
    wait_for_fresh_window(60, margin=5)
    budget = RateBudget(MemoryStore(), per_minute=10, per_hour=1000, reserve=0.2)
    share = budget.background_share(budget.windows[0])
    assert share == 8
    for _ in range(share):
        await budget.acquire(background=True)
    # The next background call waits (it does not fail, and it does not take a user's unit).
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(budget.acquire(background=True), timeout=0.3)
    await budget.acquire()
    await budget.acquire()
    with pytest.raises(UpstreamRateLimited):
        await budget.acquire()


async def test_shared_store_is_one_budget() -> None:
    # Two workers with one (Redis-like) store share the key's budget.
    wait_for_fresh_window(60)
    store = MemoryStore()
    first = RateBudget(store, per_minute=4, per_hour=1000)
    second = RateBudget(store, per_minute=4, per_hour=1000)
    for budget in (first, second, first, second):
        await budget.acquire()
    with pytest.raises(UpstreamRateLimited):
        await second.acquire()


async def test_background_yields_to_interactive_demand_beyond_the_reserve() -> None:
    wait_for_fresh_window(60, margin=5)
    budget = RateBudget(MemoryStore(), per_minute=10, per_hour=1000, reserve=0.3)
    # Interactive callers used five of the minute, more than the reserve of three: the
    # background keeps room for as many again, so it may not start now.
    for _ in range(5):
        await budget.acquire()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(budget.acquire(background=True), timeout=0.3)
    # The interactive callers still have all the rest of the minute.
    await refusal_after(budget, 5)


async def test_a_paused_background_call_resumes_when_the_window_moves_on() -> None:
    # A "minute" of 2 s (ten buckets of 0.2 s): the background share of 7 is spent, the
    # eighth call waits for the oldest bucket to leave the window, then goes through.
    budget = RateBudget(MemoryStore(), per_minute=10, per_hour=1000, reserve=0.3, minute=2.0)
    loop = asyncio.get_running_loop()
    # From before the seven: the oldest bucket leaves the window 2 s after its first call,
    # however long a stalled test process takes over them.
    started = loop.time()
    for _ in range(7):
        await budget.acquire(background=True)
    await asyncio.wait_for(budget.acquire(background=True), timeout=30)
    assert loop.time() - started >= 1.5


async def test_the_window_slides_over_its_edge() -> None:
    # The upstream's throttle is a sliding log: a minute's calls spent just before a window
    # edge must still count just after it (fixed windows would allow twice the limit).
    # A "minute" of 4 s: the five count for 4 s at least, 2 s more than the wait below, a
    # margin a stalled test process keeps.
    budget = RateBudget(MemoryStore(), per_minute=5, per_hour=1000, minute=4.0)
    for _ in range(5):
        await budget.acquire()
    # Real time: half a window later (past a fixed window's edge as often as not), the five
    # must still count.
    await asyncio.sleep(2.0)
    with pytest.raises(UpstreamRateLimited):
        await budget.acquire()


# -- the fair share (CALLERS.md 2, as round 4 changed it: CALLERS.md 6) ---------------------


async def _as(
    end_user: str | None, budget: RateBudget, *, background: bool = False, caller: str = "jwt:bot"
) -> None:
    """One acquire in a task of its own (the context variable set there stays there)."""

    async def run() -> None:
        if end_user is not None:
            set_current_caller(Caller(caller, end_user, "127.0.0.1"))
        await budget.acquire(background=background)

    await asyncio.create_task(run())


async def test_one_end_user_takes_at_most_its_share_of_the_minute() -> None:
    # CALLERS.md 6: an end user's share is the share of its caller's share (0.5 of 5 = 2),
    # and it binds once another end user of the same caller has spent (alice, here).
    budget = RateBudget(MemoryStore(), per_minute=10, per_hour=1000, share=0.5)
    await _as("alice", budget)
    for _ in range(2):
        await _as("mallory", budget)
    with pytest.raises(UpstreamRateLimited) as caught:
        await _as("mallory", budget)
    assert caught.value.status_code == 503
    assert 1 <= int(caught.value.headers["Retry-After"]) <= 60
    # Everyone else is still served, and the refusal cost the window nothing: the caller,
    # alone, may fill the minute up to its last 10 % (9 of 10).
    for user in ("bob", "carol", "dave"):
        for _ in range(2):
            await _as(user, budget)
    with pytest.raises(UpstreamRateLimited):
        await _as("erin", budget)  # the share reserve: kept for callers under their share


async def test_background_work_is_not_subject_to_the_share() -> None:
    # A minute with room for the background calls (with 10 a minute, they waited for the next
    # minute, about 60 s, for the same outcome).
    budget = RateBudget(MemoryStore(), per_minute=100, per_hour=1000, share=0.02, reserve=0.0)
    # CALLERS.md 6: a share binds only while another caller spends too.
    await _as("someone", budget, caller="other-key")
    for _ in range(6):
        await _as(None, budget)  # no caller in context: background work of the service
    for _ in range(2):
        await _as("mallory", budget, background=True)  # a refresh a request started
    await _as("mallory", budget)
    await _as("mallory", budget)  # 2 = 2 % of 100: her own calls only
    with pytest.raises(UpstreamRateLimited):
        await _as("mallory", budget)
