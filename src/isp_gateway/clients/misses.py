"""Lookup misses (CALLERS.md 2 "The backend budget", 6 "Reads that are whole"): a value the
cached list does not know is asked upstream, because a customer added since the last load
must still be found.

- One question per value however many lookups ask at once, and every one of them gets its
  answer: in this process they wait for the same task; across workers (a shared store), the
  worker that asks writes the answer into the value's recheck slot and the others poll the
  slot for it within their request's deadline. None of them answers 404 while the question
  is open (issue 24: nine of ten concurrent lookups of a new customer answered 404 at once).
- With a loaded (complete) list, a value is asked about at most once per
  MISS_RECHECK_SECONDS across workers: the slot is taken in the store before the call, and
  holds the answer for the rest of the window.
- A confirmed miss is remembered for NEGATIVE_CACHE_SECONDS (the only bound before the first
  load). A failed read (an upstream error, a short read) is no answer: the slot is freed,
  nothing is remembered, and the lookups waiting for it answer the failure, never 404.

The slot (`clients:recheck:<kind>:<value>`): {"open": time} while the question is asked,
{"answer": [records]} once answered (an empty list: no such client); `true` from an older
release reads as a miss.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, cast

from isp_gateway.clients.packed import document_key
from isp_gateway.kit import deadline
from isp_gateway.kit.actions import Action
from isp_gateway.kit.errors import (
    NotFound,
    ServiceError,
    StoreUnavailable,
    UpstreamUnauthorized,
    UpstreamUnavailable,
)
from isp_gateway.upstream import clients as upstream
from isp_gateway.upstream.clients import Client, ClientRecord

if TYPE_CHECKING:
    from isp_gateway.parts import Parts

K = TypeVar("K")
T = TypeVar("T")

# How often a lookup waiting for another worker's question reads the slot again.
ANSWER_POLL_SECONDS = 0.05

# The catalogue's variants of `client_not_found` (kit/messages): the lookups' 'Client not
# found' and verify's Spanish one, both as the spec quotes them.
LOOKUP = "lookup"
VERIFY = "verify"


def client_not_found(variant: str = LOOKUP) -> NotFound:
    return NotFound(action=Action.CLIENT_NOT_FOUND, variant=variant)


def unable_to_fetch() -> ServiceError:
    # Spec 5.2: our key was rejected; say nothing more (the details are in the log).
    return ServiceError(action=Action.UPSTREAM_REFUSED_CLIENT_FETCH, status_code=502)


def miss_key(kind: str, value: str) -> str:
    """A confirmed miss of one value, remembered for NEGATIVE_CACHE_SECONDS."""
    return f"clients:miss:{kind}:{value}"


def recheck_key(kind: str, value: str) -> str:
    """The slot of one value's upstream question, taken for MISS_RECHECK_SECONDS."""
    return f"clients:recheck:{kind}:{value}"


def document_values(document: str) -> list[str]:
    """The values a lookup of `document` asks the upstream, in order. Its `cedula` filter
    is exact (UPSTREAM.md) and a document with letters is usually stored in upper case: the
    upper-case form first, then the text as typed when it differs."""
    text = document.strip()
    key = document_key(text)
    return [key] if text == key else [key, text]


@dataclass(frozen=True, slots=True)
class Question:
    """One value a lookup asks about: `kind` ("document", "phone", "service_id"), the
    `value` sent upstream, and which of the upstream's records match.

    The value sent is also what keys the question's miss, recheck slot and join: a miss is
    remembered only for what was really asked. (A document keyed in upper case but asked as
    typed let a lower-case miss answer 404 to the exact, upper-case document: the upstream's
    `cedula` filter is exact.)"""

    kind: str
    value: str
    accept: Callable[[Client], bool]


class Misses:
    """The upstream questions of lookups that missed the cached list. `learned(records)` is
    called once per question answered with records while a whole list is loaded (the
    service patches the new customer into it)."""

    def __init__(self, parts: Parts, *, learned: Callable[[list[ClientRecord]], None]) -> None:
        self.settings, self.store, self.gateway = parts.settings, parts.store, parts.gateway
        self._learned = learned
        # Upstream queries in flight, by (kind, value): a bot retrying an unknown document,
        # or many asking at once, costs one upstream call, not N.
        self._queries: dict[tuple[str, str], asyncio.Future[list[ClientRecord]]] = {}
        # Questions of this process in flight (the slot, the query, the answer), by (kind,
        # value): every lookup of the value waits for the one there is.
        self._asking: dict[tuple[str, str], asyncio.Future[list[ClientRecord]]] = {}

    async def aclose(self) -> None:
        pending = [*self._asking.values(), *self._queries.values()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def matches(self, question: Question, *, complete: bool) -> list[ClientRecord]:
        """The upstream's records of one value the cached list missed (those the question
        accepts), or NotFound. `complete`: a whole list is loaded (a short read never is)."""
        asking = _joined(
            self._asking, (question.kind, question.value), lambda: self._ask(question, complete)
        )
        # shield: a caller that disconnects must not cancel the question others wait for.
        return await asyncio.shield(asking)

    async def _ask(self, question: Question, complete: bool) -> list[ClientRecord]:
        store = self.store
        if await store.get(miss_key(question.kind, question.value)) is not None:
            raise client_not_found()
        recheck = self.settings.MISS_RECHECK_SECONDS
        if not complete or recheck <= 0:
            return await self._answer(question, complete)
        # A miss of a complete index asks the upstream about that value at most once per
        # MISS_RECHECK_SECONDS, across all workers: the slot is taken in the store before
        # the call, so a loop of the same miss, or the same miss on two workers at once,
        # costs one call (CALLERS.md 2); the others wait for its answer.
        slot = recheck_key(question.kind, question.value)
        opened = time.time()
        if not await store.set_if_absent(slot, {"open": opened}, ttl=recheck):
            taken = await self._answer_of(slot)
            if taken is not None:
                return taken
            # The question was abandoned (its worker went away): this lookup asks.
            opened = time.time()
            await store.set(slot, {"open": opened}, ttl=recheck)
        try:
            found = await self._answer(question, complete)
        except NotFound:
            await self._close(slot, [], opened)
            raise
        except BaseException:
            # A failed read is no answer about the value: the next lookup asks again, never
            # "not found" on its strength; the lookups waiting for it answer the failure.
            await asyncio.shield(self._free(slot))
            raise
        await self._close(slot, found, opened)
        return found

    async def _answer(self, question: Question, complete: bool) -> list[ClientRecord]:
        """Ask the upstream: the records the question accepts, or NotFound (remembered for
        NEGATIVE_CACHE_SECONDS)."""
        try:
            records = await self.query(question.kind, question.value)
        except UpstreamUnauthorized:
            raise unable_to_fetch() from None
        found = [r for r in records if question.accept(r["client"])]
        if not found:
            if self.settings.NEGATIVE_CACHE_SECONDS > 0:
                ttl = self.settings.NEGATIVE_CACHE_SECONDS
                await self.store.set(miss_key(question.kind, question.value), True, ttl=ttl)
            raise client_not_found()
        if complete:
            self._learned(found)
        return found

    async def _close(self, slot: str, found: list[ClientRecord], opened: float) -> None:
        """The answer, kept in the slot for the rest of its window."""
        left = self.settings.MISS_RECHECK_SECONDS - (time.time() - opened)
        if left > 0:
            await self.store.set(slot, {"answer": found}, ttl=left)

    async def _free(self, slot: str) -> None:
        with contextlib.suppress(StoreUnavailable):  # away: the slot expires on its own
            await self.store.delete(slot)

    def _abandoned_after(self) -> float:
        """An open question older than this was abandoned: a question ends within its
        request's deadline (the upstream's timeout) and a margin."""
        return 2 * self.settings.UPSTREAM_TIMEOUT_SECONDS + 2

    async def _answer_of(self, slot: str) -> list[ClientRecord] | None:
        """The answer of the question holding `slot` (another worker's, or one asked
        earlier in the window), waited for while it is open and the request has time: the
        records, NotFound, or UpstreamUnavailable when it failed or time ran out. None when
        the question was abandoned."""
        now = deadline.current()
        left = now.left() if now is not None else self.settings.UPSTREAM_TIMEOUT_SECONDS
        until = time.monotonic() + left
        while True:
            value: Any = await self.store.get(slot)
            if value is None:
                # Freed: the question failed (or the window ended as it was read).
                raise UpstreamUnavailable()
            if not isinstance(value, dict):
                raise client_not_found()  # an older release's slot: a miss in the window
            if "answer" in value:
                found = cast(list[ClientRecord], value["answer"] or [])
                if not found:
                    raise client_not_found()
                return found
            opened = value.get("open")
            if not isinstance(opened, int | float) or time.time() - opened > (
                self._abandoned_after()
            ):
                return None
            if time.monotonic() >= until:
                raise UpstreamUnavailable()
            await asyncio.sleep(ANSWER_POLL_SECONDS)

    async def query(self, kind: str, value: str) -> list[ClientRecord]:
        """One upstream query per (kind, value) however many lookups wait for it."""
        query = _joined(
            self._queries, (kind, value), lambda: upstream.query_clients(self.gateway, kind, value)
        )
        # shield: a caller that disconnects must not cancel the query others wait for.
        return await asyncio.shield(query)


def _joined(
    flights: dict[K, asyncio.Future[T]], key: K, start: Callable[[], Coroutine[Any, Any, T]]
) -> asyncio.Future[T]:
    """The one task of `key` in flight, started by `start` when there is none; it leaves
    `flights` when it ends."""
    flight = flights.get(key)
    if flight is None:
        flight = flights[key] = asyncio.ensure_future(start())

        def done(finished: asyncio.Future[T]) -> None:
            if flights.get(key) is finished:
                del flights[key]
            if not finished.cancelled():
                finished.exception()  # retrieved here: every waiter may have gone away

        flight.add_done_callback(done)
    return flight
