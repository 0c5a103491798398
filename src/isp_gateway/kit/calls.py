"""How many upstream calls a piece of work made: a cached list's load measures its pages
this way, whatever the resource (the gateway counts each call it sends)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
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


# Told the rows of each page a whole-list read gets, and the count its first page announces.
ProgressReport = Callable[[int, int | None], Awaitable[None]]
_progress: ContextVar[ProgressReport | None] = ContextVar("load_progress", default=None)


@contextmanager
def reporting_progress(report: ProgressReport | None) -> Iterator[None]:
    """Tell `report` about every page the whole-list reads of this context get (tasks it
    starts included): `report(rows, total)`, `total` the count the first page of a read
    announces (None on the others). A cached list's first load shows its progress this way
    (kit/progress.py)."""
    token = _progress.set(report)
    try:
        yield
    finally:
        _progress.reset(token)


async def report_page(rows: int, count: int | None) -> None:
    """A whole-list read got a page of `rows` (the upstream gateway calls this)."""
    report = _progress.get()
    if report is not None:
        await report(rows, count)
