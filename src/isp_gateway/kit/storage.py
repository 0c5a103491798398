"""The store: the one place for shared, expiring state.

Cache entries, locks, counters, idempotency records, throttles and ping task records all go
through this Protocol. The in-memory store serves one process; a Redis store implements the
same Protocol so several workers share one view with no change above this layer. Values must
be JSON-serialisable (dicts, lists, str, numbers, bool, None) so that both stores behave alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol


class LockTimeout(Exception):
    """The lock could not be acquired in time."""


# -- counters taken under a rule (`Store.take_if`) --------------------------------------------

# A bound on the sums of some series: sum(coefficient * sums[index]) <= limit.
Bound = tuple[tuple[tuple[int, int], ...], int]
# All of its clauses hold; a clause holds when any of its alternatives does, an alternative
# when all of its bounds do.
Rule = Sequence[Sequence[Sequence[Bound]]]


@dataclass(frozen=True, slots=True)
class Series:
    """Counters kept in buckets: the rule reads the sum of `keys`; a take adds 1 to the last
    key (the current bucket), which is given `ttl` (seconds) when the take creates it."""

    keys: Sequence[str]
    ttl: float
    take: bool = True


def rule_holds(sums: Sequence[int], rule: Rule) -> bool:
    """Whether `rule` holds for the sums of its series (the stores' `take_if`, and whoever
    asks when it will hold again). The Redis store runs the same evaluation in Lua."""
    return all(
        any(
            all(sum(coef * sums[index] for index, coef in terms) <= limit for terms, limit in alt)
            for alt in clause
        )
        for clause in rule
    )


class Store(Protocol):
    async def get(self, key: str) -> Any | None:
        """The value, or None when absent or expired."""

    async def get_many(self, keys: list[str]) -> list[Any | None]:
        """The values of several keys in one round trip (None for each absent one)."""

    async def set(self, key: str, value: Any, ttl: float | None = None) -> None:
        """Store a value; `ttl` in seconds, None for no expiry."""

    async def set_replicated(self, key: str, value: Any, ttl: float | None = None) -> None:
        """`set`, returning once the value would survive a failover of the store: with Redis
        under Sentinel, once a replica has it too (and this write follows every earlier
        one, of any worker). Without a replica to wait for it is `set`. For a record that
        must outlive a master's crash, such as the mark of a ticket about to be created."""

    async def set_if_absent(self, key: str, value: Any, ttl: float | None = None) -> bool:
        """Store only when the key is absent; True when this call stored it."""

    async def delete(self, key: str) -> None: ...

    async def lease(self, key: str, owner: str, ttl: float) -> bool:
        """Hold `key` for `owner` for `ttl` seconds, atomically: taken when free, renewed when
        `owner` holds it already; False (and nothing changed) when another owner holds it.
        For work one worker at a time does, taken over when its holder stops renewing (it
        died). A `ttl` of 0 gives the lease up when `owner` holds it."""

    async def incr(self, key: str, amount: int = 1, ttl: float | None = None) -> int:
        """Atomically add to a counter; the ttl is set when the counter is created."""

    async def ttl(self, key: str) -> float | None:
        """Seconds until the key expires; None when absent or without expiry."""

    async def take_if(self, series: Sequence[Series], rule: Rule) -> tuple[bool, list[list[int]]]:
        """Atomically, in one round trip: read the counters of every series and, when `rule`
        holds for their sums, add 1 to the last counter of each series marked `take`.
        Whether it took, and the counters as read (before the take; 0 for an absent one),
        so a refused caller can tell when the rule will hold again. Concurrent takes (other
        workers) never see one another half-done: together they never pass the rule."""

    async def log_append(self, key: str, value: Any, max_len: int) -> None:
        """Append a value to a capped log (the audit). It keeps at least the newest `max_len`
        entries (Redis trims whole blocks, so a few more may stay); readers bound themselves."""

    async def log_read(
        self, key: str, count: int, before: str | None = None
    ) -> list[tuple[str, Any]]:
        """Up to `count` (entry id, value) pairs of a capped log, newest first, strictly older
        than the entry id `before` when given (to page back from the last one read)."""

    def lock(
        self, name: str, *, timeout: float = 30.0, blocking_timeout: float | None = None
    ) -> AbstractAsyncContextManager[None]:
        """A mutual-exclusion lock by name. `timeout` bounds how long a holder may keep it
        (so a crashed holder cannot block forever); `blocking_timeout` bounds the wait and
        raises LockTimeout when exceeded."""

    async def close(self) -> None: ...
