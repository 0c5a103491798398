"""The two-level fair share of the backend budget (CALLERS.md 6), on both stores: callers,
then the end users of one caller; a share binds only under contention, and the last
UPSTREAM_SHARE_RESERVE of the minute stays for those under their share. Taken atomically:
concurrent takes (two workers on one Redis) never overshoot."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from isp_gateway.kit.callers import Caller, set_current_caller
from isp_gateway.kit.errors import UpstreamRateLimited
from isp_gateway.store import MemoryStore, Store
from isp_gateway.upstream.budget import RateBudget
from tests.support import memory_or_redis_store

pytestmark = pytest.mark.anyio

REDIS_DB = 1


store = memory_or_redis_store(REDIS_DB, "ispgw:budget:*")


def shared(store: Store, per_minute: int = 100, **options: float) -> RateBudget:
    """The shipped shares (0.5, reserve 0.1) on `per_minute`, the hour out of the way."""
    values: dict[str, float] = {"share": 0.5, "share_reserve": 0.1, **options}
    return RateBudget(store, per_minute=per_minute, per_hour=100_000, **values)


async def take(budget: RateBudget, caller: str, end_user: str | None = None) -> bool:
    """One interactive call of `caller` for `end_user` (the caller itself when None):
    whether it was served."""

    async def run() -> None:
        set_current_caller(Caller(caller, end_user or caller, "127.0.0.1"))
        await budget.acquire()

    try:
        await asyncio.create_task(run())
    except UpstreamRateLimited:
        return False
    return True


async def served(budget: RateBudget, caller: str, calls: int, *users: str) -> int:
    """How many of `calls` calls of `caller` were served (end users taken in turn)."""
    count = 0
    for n in range(calls):
        user = users[n % len(users)] if users else None
        count += await take(budget, caller, user)
    return count


async def refusal(budget: RateBudget, caller: str, end_user: str | None = None) -> float:
    async def run() -> None:
        set_current_caller(Caller(caller, end_user or caller, "127.0.0.1"))
        await budget.acquire()

    with pytest.raises(UpstreamRateLimited) as caught:
        await asyncio.create_task(run())
    assert caught.value.status_code == 503
    assert caught.value.action == "upstream_rate_limited"
    return float(caught.value.headers["Retry-After"])


async def test_a_lone_bot_uses_all_but_the_share_reserve(store: Store) -> None:
    budget = shared(store)
    assert (budget.caller_share(), budget.end_user_share(), budget.uncontended_limit()) == (
        50,
        25,
        90,
    )
    # No X-End-User-Id: the caller is its own end user. Round 3 refused it at 50.
    assert await served(budget, "jwt:bot", 120) == 90
    assert 1 <= await refusal(budget, "jwt:bot") <= 60
    # The last 10 % is there for a caller under its share.
    assert await served(budget, "portal", 20) == 10


async def test_rotating_end_users_are_held_to_the_callers_share_once_another_key_spends(
    store: Store,
) -> None:
    budget = shared(store)
    # Key A, alone, a new end user for every call: 90, as a lone caller.
    assert await served(budget, "key-a", 120, *(f"u{n}" for n in range(120))) == 90
    # Key B is still served: the share reserve is its.
    assert await served(budget, "key-b", 5, "customer") == 5
    # And A, past its share while B spends, is refused whatever end user it names.
    for n in range(5):
        await refusal(budget, "key-a", f"fresh-{n}")
    assert await served(budget, "key-b", 10, "customer") == 5  # the rest of the minute


async def test_the_hour_is_shared_as_the_minute_is(store: Store) -> None:
    # A minute that never binds, an hour of 100: the hour's shares are the minute's.
    budget = RateBudget(store, per_minute=10_000, per_hour=100, share=0.5, share_reserve=0.1)
    hour = budget.windows[1]
    assert (budget.caller_share(hour), budget.end_user_share(hour)) == (50, 25)
    assert budget.uncontended_limit(hour) == 90
    # A lone key rotating end users: 90 of the hour, the last 10 kept for others ...
    assert await served(budget, "key-a", 120, *(f"u{n}" for n in range(120))) == 90
    retry_after = await refusal(budget, "key-a", "fresh")
    assert 60 < retry_after <= 3600  # the hour, not the minute, holds it
    # ... whom it cannot keep out, nor share with once they spend.
    assert await served(budget, "key-b", 20, "customer") == 10
    await refusal(budget, "key-a", "another")


async def test_a_caller_past_its_share_stops_when_another_starts(store: Store) -> None:
    budget = shared(store)
    assert await served(budget, "key-a", 60, *(f"u{n}" for n in range(60))) == 60
    assert await take(budget, "key-b")  # B spends: A, at 60 of a share of 50, is held
    await refusal(budget, "key-a", "new-person")
    # B, naming no end user, is one person to the gateway: past a person's share (25) it
    # is served up to the share reserve (90 of the minute), not into it ...
    assert await served(budget, "key-b", 60) == 29
    # ... which stays for anyone under their share: a person B names, another key.
    assert await served(budget, "key-b", 5, "customer") == 5
    assert await served(budget, "key-c", 10) == 5  # the minute's 100
    await refusal(budget, "key-a", "another")


async def test_two_busy_callers_get_half_each(store: Store) -> None:
    budget = shared(store)
    counts = {"key-a": 0, "key-b": 0}
    for n in range(150):
        caller = ("key-a", "key-b")[n % 2]
        counts[caller] += await take(budget, caller, f"user-{n}")
    assert counts == {"key-a": 50, "key-b": 50}


async def test_end_users_of_one_caller_share_its_part(store: Store) -> None:
    budget = shared(store)
    # Two people behind one bot, both busy: 25 each (half of the caller's half).
    counts = {"x": 0, "y": 0}
    for n in range(80):
        user = ("x", "y")[n % 2]
        counts[user] += await take(budget, "jwt:bot", user)
    assert counts == {"x": 25, "y": 25}
    # A third person is served (the caller, alone, is not held to its own share).
    assert await served(budget, "jwt:bot", 10, "z") == 10


async def test_one_person_behind_a_lone_bot_is_not_held_to_a_share(store: Store) -> None:
    # The person-level share binds only while another person of that caller spends.
    budget = shared(store, per_minute=200)
    assert await served(budget, "jwt:bot", 200, "only-one") == 180


async def test_a_refusal_takes_nothing_and_its_retry_after_is_when_it_is_served(
    store: Store,
) -> None:
    # A "minute" of 2 s (buckets of 0.2 s): the lone caller's 9 of 10 leave the window
    # within it, and then it is served again.
    budget = RateBudget(
        store, per_minute=10, per_hour=100_000, share=0.5, share_reserve=0.1, minute=2.0
    )
    assert await served(budget, "bot", 9) == 9
    for _ in range(20):  # refusals cost nothing: the unit stays for a caller under its share
        assert not await take(budget, "bot")
    assert await take(budget, "portal")
    retry_after = await refusal(budget, "bot")
    assert 1 <= retry_after <= 2  # the 503's Retry-After: whole seconds, at least one
    # The wait itself, to the bucket: once it passed, the bot is served again.
    set_current_caller(Caller("bot", "bot", "127.0.0.1"))
    wait, window = await budget._try(background=False)
    assert 0 < wait <= 2.2  # the window and one bucket at most
    assert window == 2.0
    await asyncio.sleep(wait + 0.05)
    assert await take(budget, "bot")


async def test_concurrent_workers_never_overshoot(store: Store) -> None:
    # Two budgets on one store (two workers), waves of calls at once of one lone caller,
    # then of a second one: exactly 90, then exactly the 10 left.
    workers = [shared(store), shared(store)]

    async def wave(caller: str, size: int = 50) -> int:
        # 50 at once: redis-py's pool holds at most 100 connections.
        answers = await asyncio.gather(
            *(take(workers[n % 2], caller, f"u{n}") for n in range(size))
        )
        return sum(answers)

    assert [await wave("key-a") for _ in range(3)] == [50, 40, 0]
    assert [await wave("key-b") for _ in range(2)] == [10, 0]


class CountingStore(MemoryStore):
    """A memory store that counts the calls made to it (each one a round trip to Redis)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    async def take_if(self, series: Any, rule: Any) -> tuple[bool, list[list[int]]]:
        self.calls.append("take_if")
        return await super().take_if(series, rule)

    async def get_many(self, keys: list[str]) -> list[Any]:
        self.calls.append("get_many")
        return await super().get_many(keys)

    async def incr(self, key: str, amount: int = 1, ttl: float | None = None) -> int:
        self.calls.append("incr")
        return await super().incr(key, amount, ttl)


async def test_one_store_round_trip_per_call_taken_or_refused() -> None:
    # CALLERS.md 6 "one deadline for the store": the budget adds one store call to a request
    # that calls the upstream, shares included, whether it is served or refused.
    store = CountingStore()
    budget = shared(store, per_minute=4)
    assert await take(budget, "key-a", "someone")
    assert store.calls == ["take_if"]
    for _ in range(5):
        await take(budget, "key-b")
    assert store.calls == ["take_if"] * 6
