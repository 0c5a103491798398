"""How many upstream calls a piece of work made: a cached list's load measures its pages
this way, whatever the resource (the gateway counts each call it sends)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass
class CallCount:
    count: int = 0


_calls: ContextVar[CallCount | None] = ContextVar("upstream_calls", default=None)


@contextmanager
def counting_calls() -> Iterator[CallCount]:
    """Count the upstream calls made in this context (tasks it starts included): a cached
    list's load measures its pages this way, whatever the resource."""
    counter = CallCount()
    token = _calls.set(counter)
    try:
        yield counter
    finally:
        _calls.reset(token)


def count_call() -> None:
    """One upstream call was sent in this context."""
    counter = _calls.get()
    if counter is not None:
        counter.count += 1
