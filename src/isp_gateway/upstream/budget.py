"""The upstream's rate budget: about 100 calls a minute and 1000 an hour per key.

Counted in the store, so several workers sharing a Redis store share one budget. Each window
is counted in ten sub-buckets and a call is admitted against the sum of the last window and
a bucket: the upstream's own throttle is a sliding log (DRF), and plain fixed windows would
let twice the minute's budget through across a window edge, answered by a 429.

Interactive calls (a ticket, a ping, a lookup miss, a single-client confirmation) come first:
they may spend the whole window. Background work (whole-list refreshes) yields: it takes a
call only while the window keeps room for the interactive reserve
(`UPSTREAM_INTERACTIVE_RESERVE`, default 30 %) or, when interactive callers used more than
that lately, for as many as they used. A refused background call waits (its refresh pauses
and resumes where it was); it never takes an interactive caller's unit.

The fair share (CALLERS.md 6), on the interactive minute, in two levels: each caller (an API
key's name, `jwt:<sub>`) may spend `UPSTREAM_CALLER_SHARE` of it, each end user of a caller
(`X-End-User-Id`, else the caller itself) the same fraction of its caller's share. A share
binds only under contention: past its share, a caller is still served while no other caller
has spent in the window, and an end user while no other end user of its caller has; but
never into the last `UPSTREAM_SHARE_RESERVE` of the minute, kept for those under their share.
So a lone bot may use 90 of 100 calls a minute, and a key rotating end-user ids is held to
its caller's share as soon as another key spends. The hour is shared the same way (its own
counters, the same fractions): held to half of the minute, a key rotating end-user ids
would otherwise still spend the whole hour in twenty minutes and leave every other key a
503 until it ends.

Every decision is one atomic `Store.take_if` (one round trip, a Lua script on Redis): the
counters of the window are read, the rule checked and the call counted together, so
concurrent workers never overshoot, and a refused call takes nothing.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, replace

from isp_gateway.kit.callers import Caller, current_caller
from isp_gateway.kit.errors import UpstreamRateLimited
from isp_gateway.store import Bound, Rule, Series, Store, rule_holds

DEFAULT_INTERACTIVE_RESERVE = 0.3
DEFAULT_CALLER_SHARE = 1.0  # no fair share unless configured (the app passes the setting)
DEFAULT_SHARE_RESERVE = 0.1
BUCKETS = 10  # sub-buckets per window


@dataclass(frozen=True)
class Window:
    length: float  # seconds
    limit: int  # calls per window

    @property
    def bucket(self) -> float:
        return self.length / BUCKETS

    def ttl(self) -> float:
        """How long a bucket's counter is kept: as long as a sum may still read it."""
        return self.length + 2 * self.bucket + 5


def _ceil(value: float) -> int:
    # 0.1 * 30 is 3.0000000000000004: rounded first, so a share of a round number is exact.
    return math.ceil(round(value, 9))


def _floor(value: float) -> int:
    return math.floor(round(value, 9))


@dataclass(frozen=True)
class _Counted:
    """One series the budget reads (and takes from): its window and first bucket."""

    window: Window
    first: int  # the bucket of its first key
    series: Series


class RateBudget:
    def __init__(
        self,
        store: Store,
        per_minute: int,
        per_hour: int,
        *,
        reserve: float = DEFAULT_INTERACTIVE_RESERVE,
        share: float = DEFAULT_CALLER_SHARE,
        share_reserve: float = DEFAULT_SHARE_RESERVE,
        minute: float = 60.0,
        hour: float = 3600.0,
    ) -> None:
        self._store = store
        self.windows = (Window(minute, per_minute), Window(hour, per_hour))
        self.reserve = reserve
        self.share = share
        self.share_reserve = share_reserve

    # -- the shares -----------------------------------------------------------------------

    def caller_share(self, window: Window | None = None) -> int:
        """Calls of a window (the minute unless told) one caller may spend under contention
        (at least one)."""
        window = window or self.windows[0]
        return max(1, _floor(window.limit * self.share))

    def end_user_share(self, window: Window | None = None) -> int:
        """Calls of a window one end user may spend while another end user of its caller
        spends too: the same fraction of its caller's share (at least one)."""
        return max(1, _floor(self.caller_share(window) * self.share))

    def uncontended_limit(self, window: Window | None = None) -> int:
        """How full a window may get from calls past a share (no one else contending):
        the last UPSTREAM_SHARE_RESERVE of it stays for those under their share."""
        window = window or self.windows[0]
        return window.limit - min(window.limit, _ceil(window.limit * self.share_reserve))

    def reserved(self, window: Window) -> int:
        """Calls of a window kept for interactive callers."""
        return min(window.limit, _ceil(window.limit * self.reserve))

    def background_share(self, window: Window) -> int:
        """Calls of a window background work may spend when interactive demand is low."""
        return window.limit - self.reserved(window)

    # -- counters -------------------------------------------------------------------------

    @staticmethod
    def _key(window: Window, bucket: int, interactive: bool) -> str:
        return f"budget:{window.length:g}:{bucket}{':i' if interactive else ''}"

    @staticmethod
    def _buckets(window: Window, now: float) -> range:
        """The buckets a sum reads at `now`: the current one and the window before it."""
        current = int(now // window.bucket)
        return range(current - BUCKETS, current + 1)

    def _counted(
        self, window: Window, now: float, prefix: str, suffix: str = "", *, take: bool = True
    ) -> _Counted:
        """The series of counters `<prefix><bucket><suffix>` a sum at `now` reads."""
        buckets = self._buckets(window, now)
        keys = [f"{prefix}{b}{suffix}" for b in buckets]
        return _Counted(window, buckets[0], Series(keys, window.ttl(), take))

    def _plan(
        self, now: float, background: bool, caller: Caller | None
    ) -> tuple[list[_Counted], Rule]:
        """The series one call reads and takes from, and the rule that admits it.

        Series 0 and 1: the minute's calls, its interactive calls; 2 and 3: the hour's. With
        a caller (interactive, fair share on), 4: the minute's calls of every caller, 5: of
        this caller, 6: of this end user of it; 7, 8 and 9: the same in the hour."""
        minute, hour = self.windows
        interactive = not background
        counted = [
            self._counted(minute, now, f"budget:{minute.length:g}:"),
            self._counted(minute, now, f"budget:{minute.length:g}:", ":i", take=interactive),
            self._counted(hour, now, f"budget:{hour.length:g}:"),
            self._counted(hour, now, f"budget:{hour.length:g}:", ":i", take=interactive),
        ]

        def at_most(limit: int, *terms: tuple[int, int]) -> Bound:
            return (terms, limit)

        rule: list[list[list[Bound]]] = []
        if background:
            for total, lately, window in ((0, 1, minute), (2, 3, hour)):
                # Within the background share, and leaving room for as many interactive
                # calls as were made lately: total <= limit - max(reserved, interactive).
                rule.append(
                    [
                        [
                            at_most(window.limit - self.reserved(window) - 1, (total, 1)),
                            at_most(window.limit - 1, (total, 1), (lately, 1)),
                        ]
                    ]
                )
            return counted, rule
        rule.append([[at_most(minute.limit - 1, (0, 1))]])
        rule.append([[at_most(hour.limit - 1, (2, 1))]])
        if caller is None:
            return counted, rule
        # Unambiguous whatever the names hold: the caller's length first.
        who = f"{len(caller.caller)}:{caller.caller}"
        for window, total in ((minute, 0), (hour, 2)):
            length = f"{window.length:g}"
            first = len(counted)
            everyone, this_caller, this_user = first, first + 1, first + 2
            counted += [
                self._counted(window, now, f"budget:callers:{length}:"),
                self._counted(window, now, f"budget:caller:{length}:", f":{who}"),
                self._counted(window, now, f"budget:user:{length}:", f":{who}:{caller.end_user}"),
            ]
            beyond = self.uncontended_limit(window) - 1
            # The caller: under its share, or alone (no other caller spent) and short of the
            # share reserve.
            rule.append(
                [
                    [at_most(self.caller_share(window) - 1, (this_caller, 1))],
                    [
                        at_most(0, (everyone, 1), (this_caller, -1)),
                        at_most(beyond, (total, 1)),
                    ],
                ]
            )
            # The end user, likewise among the end users of its caller.
            rule.append(
                [
                    [at_most(self.end_user_share(window) - 1, (this_user, 1))],
                    [
                        at_most(0, (this_caller, 1), (this_user, -1)),
                        at_most(beyond, (total, 1)),
                    ],
                ]
            )
        return counted, rule

    async def _try(self, background: bool, *, take: bool = True) -> tuple[float, float]:
        """Take one call from every window: (0, 0) on success, else the seconds to wait
        and the length of the window that sets them. `take=False` only looks."""
        now = time.time()
        caller = None if background or self.share >= 1 else current_caller()
        counted, rule = self._plan(now, background, caller)
        series = [c.series if take else replace(c.series, take=False) for c in counted]
        taken, values = await self._store.take_if(series, rule)
        if taken:
            return 0.0, 0.0
        return self._wait(now, counted, rule, values)

    async def background_wait(self) -> float:
        """Seconds until a background call would be admitted (0: now), spending nothing:
        what a request waiting for a whole-list load learns when the load is held by the
        budget (kit/deadline.bounded), shared by the workers like the budget itself. At most
        the window that holds it, as a Retry-After (see `acquire`)."""
        wait, window = await self._try(True, take=False)
        return min(wait, window)

    @staticmethod
    def _wait(
        now: float, counted: list[_Counted], rule: Rule, values: list[list[int]]
    ) -> tuple[float, float]:
        """Seconds until `rule` holds with the counters read, if nothing else is spent
        meanwhile (buckets leave the sums at their windows' bucket edges, tried in order),
        and the length of the window whose edge that is."""
        edges = sorted(
            {
                (c.window.bucket * (int(now // c.window.bucket) + k), c.window.length)
                for c in counted
                for k in range(1, BUCKETS + 2)
            }
        )
        for at, length in edges:
            sums = []
            for c, counts in zip(counted, values, strict=True):
                # Buckets older than the window at `at` have left the sum.
                oldest = int((at + 1e-6) // c.window.bucket) - BUCKETS
                sums.append(sum(n for b, n in enumerate(counts, c.first) if b >= oldest))
            if rule_holds(sums, rule):
                return max(0.01, at - now), length
        longest = max(c.window.length for c in counted)
        return longest, longest

    async def remaining(self) -> dict[str, tuple[int, int]]:
        """Calls left in each current window and its limit, `minute` and `hour` (metrics)."""
        now = time.time()
        left: dict[str, tuple[int, int]] = {}
        for name, window in zip(("minute", "hour"), self.windows, strict=True):
            keys = [self._key(window, b, False) for b in self._buckets(window, now)]
            used = sum(int(v) for v in await self._store.get_many(keys) if v is not None)
            left[name] = (max(0, window.limit - used), window.limit)
        return left

    async def acquire(self, *, background: bool = False, max_wait: float = 0.0) -> None:
        """Spend one upstream call. An interactive call raises UpstreamRateLimited at once
        when the budget (or its share of it) is gone (a bot cannot wait a minute);
        background work waits."""
        deadline = time.monotonic() + max_wait
        while True:
            wait, window = await self._try(background)
            if wait <= 0:
                return
            if not background and time.monotonic() + wait > deadline:
                # The bucketed window holds a call up to a bucket longer than the upstream's
                # own log does: a Retry-After never asks for more than the window itself.
                raise UpstreamRateLimited(max(1.0, min(wait, window)))
            await asyncio.sleep(wait + 0.01)
