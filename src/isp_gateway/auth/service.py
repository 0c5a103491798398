"""The login (spec 4.2) as a service: it decides the outcome of an attempt (a token, wrong
credentials, or locked with a retry-after), counts it on the login throttles (CALLERS.md 2)
and records the `login` audit event (CALLERS.md 4: `ok`, `failed`, `locked`) before the
router renders the answer. No password ever reaches an event or a log line.
"""

from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio.to_thread

from isp_gateway.auth.passwords import dummy_hash, verify_password
from isp_gateway.auth.tokens import issue_token
from isp_gateway.kit.callers import Caller
from isp_gateway.kit.throttle import FailureThrottle

if TYPE_CHECKING:
    from isp_gateway.parts import Parts

log = logging.getLogger("isp_gateway.auth")

# A username is kept this long at most in a log line.
USERNAME_SHOWN = 64
# The audit's caller of a login attempt under any username but the configured one.
UNKNOWN_USER = "login:unknown-user"


@dataclass(frozen=True, slots=True)
class LoginOutcome:
    """`token` when the login succeeded; else `retry_after` when it is locked, else it
    failed (wrong username or password)."""

    token: str | None = None
    retry_after: int | None = None


class AuthService:
    def __init__(self, parts: Parts) -> None:
        self._settings = settings = parts.settings
        self._store = store = parts.store
        self._audit = parts.audit
        # Per username and address, and (CALLERS.md 2) per username from every address.
        self._pair_throttle = FailureThrottle(
            store, "login", settings.LOGIN_MAX_FAILURES, settings.LOGIN_LOCKOUT_SECONDS
        )
        self._user_throttle = FailureThrottle(
            store,
            "login",
            settings.LOGIN_USERNAME_MAX_FAILURES,
            settings.LOGIN_LOCKOUT_SECONDS,
        )

    async def login(self, username: str, password: str, address: str) -> LoginOutcome:
        settings = self._settings
        throttle = self._pair_throttle
        every_throttle = self._user_throttle
        name = username.lower()
        pair = f"pair:{name}|{address}"
        every = f"user:{name}"
        known_key = f"login:known:{name}|{address}"
        known = hmac.compare_digest(username.encode(), settings.API_USERNAME.encode())
        # The login has no credential yet: the audit's caller is the user it tries to be,
        # named only when it is the configured one (a password typed into the username
        # field must never reach the audit).
        tried = f"jwt:{settings.API_USERNAME}" if known else UNKNOWN_USER
        who = Caller(tried, tried, address, frozenset())
        # CALLERS.md 2: a username's failures from every address lock it only for addresses
        # that have not logged in as that user lately, so nobody elsewhere locks the bots out.
        known_address = await self._store.get(known_key) is not None
        # Each attempt is counted before the slow bcrypt check, atomically, so parallel
        # guesses cannot all pass the check-then-count gap; a success clears the pair below.
        pair_count, wait = await throttle.reserve_count(pair)
        if wait is not None:
            return await self._locked(who, wait)
        user_count, wait = await every_throttle.reserve_count(every)
        if wait is not None and not known_address:
            await throttle.release(pair)
            return await self._locked(who, wait)
        # Unknown users are checked against a dummy hash so response time does not tell
        # them apart.
        configured = settings.API_PASSWORD_HASH.get_secret_value()
        # Built (once) off the event loop: hashing is as slow as checking.
        hashed = configured if known else await anyio.to_thread.run_sync(dummy_hash, configured)
        valid = await verify_password(password, hashed) and known
        if not valid:
            # Named only when it is the configured username: another "username" may be a
            # password typed into the wrong field, and no password reaches a log line.
            shown = username[:USERNAME_SHOWN] if known else "(not the configured one)"
            # Already counted by `reserve_count`; the attempt that fills a counter locks it.
            if pair_count == throttle.max_failures:
                log.warning(
                    "login locked for username %r from address %s: %d failures in %d s",
                    shown, address, pair_count, throttle.window,
                )  # fmt: skip
            if user_count == every_throttle.max_failures:
                log.warning(
                    "login locked for username %r from addresses that have not logged in as "
                    "it lately: %d failures in %d s",
                    shown, user_count, throttle.window,
                )  # fmt: skip
            await self._audit.record("login", "failed", caller=who)
            return LoginOutcome()
        await throttle.success(pair)
        # Not a failure: give back this attempt's unit of the username's count. The count
        # itself stays: other addresses' failures are not forgiven by the bots' own login.
        await every_throttle.release(every)
        await self._store.set(known_key, True, ttl=settings.LOGIN_KNOWN_ADDRESS_SECONDS)
        await self._audit.record("login", "ok", caller=who)
        return LoginOutcome(token=issue_token(settings, settings.API_USERNAME))

    async def _locked(self, who: Caller, wait: int) -> LoginOutcome:
        await self._audit.record("login", "locked", caller=who, details={"retry_after": wait})
        return LoginOutcome(retry_after=wait)
