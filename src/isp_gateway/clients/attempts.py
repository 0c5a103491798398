"""The identity counters (CALLERS.md 2 and 6): every verify and resolve failure counts on
each counter it concerns, 15-minute windows (VERIFY_LOCKOUT_SECONDS):
- (service, end user): VERIFY_MAX_FAILURES lock that pair;
- (end user), verify and resolve together: VERIFY_END_USER_MAX_FAILURES;
  an end user is its caller's own claim, so these two count the caller's end user: the
  same `X-End-User-Id` under another key is another person, and a key naming another
  caller's end user (or the caller itself, the end user of a request without one) counts
  on its own, never locking that caller out;
- (service), every end user: VERIFY_SERVICE_MAX_FAILURES (a distributed guess);
- (caller), every end user and service: CALLER_IDENTITY_FAILURES. `X-End-User-Id` is the
  caller's own claim: rotating it never lifts this one.
An attempt is counted on all of them before it is checked (FailureThrottle.reserve), so
parallel guesses cannot slip past a lock; an attempt that turns out to be no failure gives
its units back. The failure that fills a caller's counter writes one WARNING line and one
audit event (the refusals after it are counted, like every refusal).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from isp_gateway.kit.actions import Action
from isp_gateway.kit.errors import Locked
from isp_gateway.kit.throttle import FailureThrottle

if TYPE_CHECKING:
    from isp_gateway.kit.recorder import Recorder
    from isp_gateway.kit.storage import Store
    from isp_gateway.settings import Settings

log = logging.getLogger("isp_gateway.clients")


def locked(retry_after: int) -> Locked:
    return Locked(retry_after=retry_after, action=Action.CLIENT_VERIFICATION_LOCKED)


Counter = tuple[FailureThrottle, str]


def person(caller: str, end_user: str) -> str:
    """The end user `end_user` of `caller`, as the counters key it (the caller's length
    first: a name may hold any character, and no two pairs give one key)."""
    return f"{len(caller)}:{caller}|{end_user}"


@dataclass(frozen=True, slots=True)
class Reservation:
    """The counters one attempt took a unit on, and its place on the caller's counter."""

    counters: list[Counter]
    caller: str
    caller_count: int


class IdentityCounters:
    def __init__(self, store: Store, settings: Settings, audit: Recorder) -> None:
        window = settings.VERIFY_LOCKOUT_SECONDS
        self.audit = audit
        self.pair = FailureThrottle(store, "verify", settings.VERIFY_MAX_FAILURES, window)
        self.end_user = FailureThrottle(
            store, "verify-end-user", settings.VERIFY_END_USER_MAX_FAILURES, window
        )
        self.service = FailureThrottle(
            store, "verify-service", settings.VERIFY_SERVICE_MAX_FAILURES, window
        )
        self.caller = FailureThrottle(
            store, "verify-caller", settings.CALLER_IDENTITY_FAILURES, window
        )

    def of_verify(self, service_id: int, caller: str, end_user: str) -> list[Counter]:
        # The caller's first: a caller locked out takes no unit on the others.
        who = person(caller, end_user)
        return [
            (self.caller, caller),
            (self.pair, f"{service_id}|{who}"),
            (self.end_user, who),
            (self.service, str(service_id)),
        ]

    def of_resolve(self, caller: str, end_user: str) -> list[Counter]:
        return [(self.caller, caller), (self.end_user, person(caller, end_user))]

    async def succeeded(self, service_id: int, caller: str, end_user: str) -> None:
        """`end_user` of `caller` proved who they are for `service_id`: its pair starts over."""
        await self.pair.success(f"{service_id}|{person(caller, end_user)}")

    async def reserve(self, counters: list[Counter]) -> Reservation:
        """Count the attempt on every counter before it is checked, atomically per counter;
        a refused attempt gives back what it took on the counters before (429 locked)."""
        taken: list[Counter] = []
        caller_count = 0
        for throttle, key in counters:
            count, retry_after = await throttle.reserve_count(key)
            if retry_after is not None:
                await self.release(taken)
                raise locked(retry_after)
            if throttle is self.caller:
                caller_count = count
            taken.append((throttle, key))
        return Reservation(taken, counters[0][1], caller_count)

    @staticmethod
    async def release(counters: list[Counter]) -> None:
        for throttle, key in counters:
            await throttle.release(key)

    async def failed(self, reservation: Reservation, event: str) -> None:
        """The attempt failed (its units stay counted): when it filled the caller's counter,
        say so once, in the log and in the audit."""
        limit = self.caller.max_failures
        if reservation.caller_count != limit:
            return
        log.warning(
            "identity calls of caller %r locked: %d failures in %d s",
            reservation.caller, limit, self.caller.window,
        )  # fmt: skip
        await self.audit.record(
            event,
            "locked",
            details={"counter": "caller", "failures": limit, "retry_after": self.caller.window},
        )

    async def locked_for(self, service_id: int, caller: str, end_user: str) -> int | None:
        """Seconds until `service_id` may be verified by `end_user` of `caller`, or None when
        it may."""
        for throttle, key in (
            (self.pair, f"{service_id}|{person(caller, end_user)}"),
            (self.service, str(service_id)),
        ):
            wait = await throttle.retry_after(key)
            if wait is not None:
                return wait
        return None

    async def attempts_left(self, counters: list[Counter]) -> int:
        """The fewest attempts left on any of `counters` before a lock."""
        return min([await throttle.remaining(key) for throttle, key in counters])
