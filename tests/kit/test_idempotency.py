"""idempotency.py, the helper any write takes, on the memory store and the real Redis (db 9):
the key bound to the request's fingerprint, final answers replayed as they were, other errors
not final, one request per key at a time, each key its caller's own. (POST /tickets through it:
tests/tickets; the money routes, between two API keys: tests/payments/test_idempotency_callers.)"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from isp_gateway.kit.callers import Caller, set_current_caller
from isp_gateway.kit.errors import Conflict, UpstreamUnavailable
from isp_gateway.kit.idempotency import Answer, Idempotency, KeyInProgress, KeyReused, fingerprint
from isp_gateway.store import Store
from isp_gateway.web.envelope import success
from tests.support import RUN, error_body, memory_or_redis_store

REDIS_DB = 9

pytestmark = pytest.mark.anyio


store = memory_or_redis_store(REDIS_DB, f"*{RUN}*")


def helper(store: Store, wait: float = 0.3) -> Idempotency:
    return Idempotency(store, f"{RUN}-writes", ttl=60, lock_seconds=10, wait_seconds=wait)


class Counter:
    def __init__(self) -> None:
        self.calls = 0

    async def ok(self) -> Answer:
        self.calls += 1
        return Answer(201, success("thing_created", {"n": self.calls}))

    async def refused(self) -> Answer:
        self.calls += 1
        raise Conflict("already done", action="thing_exists", data={"n": self.calls})

    async def down(self) -> Answer:
        self.calls += 1
        raise UpstreamUnavailable()


def test_the_fingerprint_ignores_key_order_only() -> None:
    assert fingerprint({"a": 1, "b": "ñ"}) == fingerprint({"b": "ñ", "a": 1})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})


async def test_without_a_key_every_call_is_done(store: Store) -> None:
    work = Counter()
    for key in (None, ""):
        answer = await helper(store).run(key, "fp", work.ok)
        assert answer.headers == {}
    assert work.calls == 2


async def test_a_repeat_replays_the_first_answer_and_does_nothing(store: Store) -> None:
    idem, work = helper(store), Counter()
    first = await idem.run("k1", "fp", work.ok)
    again = [await idem.run("k1", "fp", work.ok) for _ in range(3)]
    assert work.calls == 1
    assert first.headers == {}
    for answer in again:
        assert (answer.status_code, answer.body) == (first.status_code, first.body)
        assert answer.headers == {"Idempotent-Replayed": "true"}
    # Another key is another request.
    assert (await idem.run("k2", "fp", work.ok)).body["data"] == {"n": 2}


async def test_the_key_with_another_body_is_422_whatever_came_first(store: Store) -> None:
    idem, work = helper(store), Counter()
    await idem.run("k1", "fp-a", work.ok)
    with pytest.raises(KeyReused) as caught:
        await idem.run("k1", "fp-b", work.ok)
    assert (caught.value.status_code, caught.value.action) == (422, "idempotency_key_reused")
    # Bound from its first use even when that use failed (not final).
    with pytest.raises(UpstreamUnavailable):
        await idem.run("k2", "fp-a", work.down)
    with pytest.raises(KeyReused):
        await idem.run("k2", "fp-b", work.ok)
    assert work.calls == 2


async def test_final_refusals_are_replayed_other_errors_are_tried_again(store: Store) -> None:
    idem, work = helper(store), Counter()
    first = await idem.run("k1", "fp", work.refused, final=(Conflict,))
    assert first.status_code == 409
    assert first.body == error_body("thing_exists", "already done", data={"n": 1})
    replay = await idem.run("k1", "fp", work.ok, final=(Conflict,))
    assert (replay.status_code, replay.body) == (409, first.body)
    assert work.calls == 1
    # Not final: the error goes to the caller and a repeat with the key does the work.
    with pytest.raises(UpstreamUnavailable):
        await idem.run("k2", "fp", work.down, final=(Conflict,))
    assert (await idem.run("k2", "fp", work.ok)).body["data"] == {"n": 3}


async def test_a_key_in_flight_is_409_with_retry_after(store: Store) -> None:
    idem = helper(store, wait=0.2)
    started, release = asyncio.Event(), asyncio.Event()

    async def slow() -> Answer:
        started.set()
        await release.wait()
        return Answer(201, success("thing_created"))

    first = asyncio.create_task(idem.run("k1", "fp", slow))
    await started.wait()
    with pytest.raises(KeyInProgress) as caught:
        await idem.run("k1", "fp", slow)
    assert caught.value.status_code == 409
    assert caught.value.headers == {"Retry-After": "2"}
    release.set()
    assert (await first).status_code == 201
    assert (await idem.run("k1", "fp", slow)).headers == {"Idempotent-Replayed": "true"}


async def as_caller(name: str, work: Callable[[], Awaitable[Answer]]) -> Answer:
    """`work` run as a request of caller `name` would run it (its own context)."""

    async def request() -> Answer:
        set_current_caller(Caller(name, name, "127.0.0.1"))
        return await work()

    return await asyncio.create_task(request())


async def test_a_key_is_its_callers_own(store: Store) -> None:
    """CALLERS.md 1: the caller is the credential. Another caller's same key neither gets the
    first caller's answer nor can take the key from it, whichever comes first."""
    idem, work = helper(store), Counter()
    first = await as_caller("bot-a", lambda: idem.run("k1", "fp", work.ok))
    # Another caller, the same key and body: its own request, not a replay of bot-a's.
    other = await as_caller("bot-b", lambda: idem.run("k1", "fp", work.ok))
    assert other.headers == {} and other.body["data"] == {"n": 2}
    # bot-b takes a key with its body first; bot-a's own request with that key is done.
    await as_caller("bot-b", lambda: idem.run("k2", "fp-b", work.ok))
    mine = await as_caller("bot-a", lambda: idem.run("k2", "fp-a", work.ok))
    assert (mine.headers, mine.body["data"]) == ({}, {"n": 4})
    # Each caller's repeat still replays its own first answer, and a JWT subject is a
    # caller of its own too.
    again = await as_caller("bot-a", lambda: idem.run("k1", "fp", work.ok))
    assert (again.body, again.headers) == (first.body, {"Idempotent-Replayed": "true"})
    with pytest.raises(KeyReused):
        await as_caller("bot-b", lambda: idem.run("k2", "fp-a", work.ok))
    jwt = await as_caller("jwt:bot-a", lambda: idem.run("k1", "fp", work.ok))
    assert jwt.headers == {} and work.calls == 5
