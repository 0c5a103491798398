"""Waiting on a condition, not for a fixed time: `wait_until` polls until it holds (or
fails naming it), and the waits built on it."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


# How long `wait_until` waits by default: far beyond what any condition takes on an idle
# machine, so that a starved one still passes; a condition met returns at the next poll.
WAIT_SECONDS = 10.0
Errors = type[BaseException] | tuple[type[BaseException], ...]


def _timed_out(
    predicate: Callable[..., Any],
    timeout: float,
    message: str | Callable[[], str] | None,
    last: Any,
    error: BaseException | None,
) -> AssertionError:
    what = message() if callable(message) else message
    name = getattr(predicate, "__name__", "<lambda>")
    what = what or (f"{name}()" if name != "<lambda>" else "the condition")
    seen = f"last error {error!r}" if error is not None else f"last answer {last!r:.300}"
    return AssertionError(f"waited {timeout:g} s for {what}; {seen}")


class _Poll:
    """One wait on a condition: asks `predicate` (an error of the `ignoring` types counts as
    a false answer), keeps its last answer, and fails the test once `timeout` has passed."""

    def __init__(
        self,
        predicate: Callable[..., Any],
        timeout: float,
        message: str | Callable[[], str] | None,
        ignoring: Errors,
    ) -> None:
        self.predicate, self.timeout, self.message = predicate, timeout, message
        self.ignoring = ignoring
        self.deadline = time.monotonic() + timeout
        self.value: Any = None

    def ask(self) -> bool:
        try:
            return self.answered(self.predicate(), None)
        except self.ignoring as exc:
            return self.answered(None, exc)

    async def ask_async(self) -> bool:
        try:
            answer = self.predicate()
            return self.answered(await answer if inspect.isawaitable(answer) else answer, None)
        except self.ignoring as exc:
            return self.answered(None, exc)

    def answered(self, value: Any, error: BaseException | None) -> bool:
        self.value = value
        if value:
            return True
        if time.monotonic() >= self.deadline:
            raise _timed_out(self.predicate, self.timeout, self.message, value, error)
        return False


def wait_until(
    predicate: Callable[[], T],
    *,
    timeout: float = WAIT_SECONDS,
    interval: float = 0.02,
    message: str | Callable[[], str] | None = None,
    ignoring: Errors = (),
) -> T:
    """Ask `predicate` every `interval` seconds until it answers something true, and return
    that answer; after `timeout` seconds, fail the test naming `message` (else the
    predicate) and its last answer. Exceptions of the `ignoring` types count as a false
    answer (e.g. a server that does not accept connections yet)."""
    poll = _Poll(predicate, timeout, message, ignoring)
    while not poll.ask():
        time.sleep(interval)
    return poll.value  # type: ignore[no-any-return]


async def wait_until_async(
    predicate: Callable[[], T | Awaitable[T]],
    *,
    timeout: float = WAIT_SECONDS,
    interval: float = 0.02,
    message: str | Callable[[], str] | None = None,
    ignoring: Errors = (),
) -> T:
    """`wait_until` for a test on an event loop: the predicate may be a coroutine function,
    and the loop runs between polls."""
    poll = _Poll(predicate, timeout, message, ignoring)
    while not await poll.ask_async():
        await asyncio.sleep(interval)
    return poll.value  # type: ignore[no-any-return]


def copy_age(resource: Any) -> float | None:
    """The age of the copy a cached list (cache.py's CachedResource) holds in this process,
    from its load; None before the first."""
    stamp = resource.local_stamp
    return None if stamp is None else time.time() - stamp[0]


def wait_for_age(resource: Any, seconds: float) -> None:
    """Until the copy `resource` holds is `seconds` old: a lifetime or a freshness window
    measured from its load is over (instead of sleeping a guess past it)."""

    def old_enough() -> bool:
        age = copy_age(resource)
        return age is not None and age >= seconds

    wait_until(old_enough, timeout=seconds + 10, message=f"a copy {seconds} s old")


def wait_for_fresh_window(length: int, margin: float = 3.0) -> None:
    """Counters in fixed windows reset at the boundary: start a test well inside one (it
    waits for the clock, at most `margin` seconds, and only when the window ends sooner)."""
    wait_until(
        lambda: length - (time.time() % length) >= margin,
        timeout=margin + 1,
        message=f"a fresh {length} s window",
    )
