"""Background tasks a long-lived part owns (a flusher, a sweep, a releaser)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any


async def stop(task: asyncio.Task[Any] | None) -> None:
    """Cancel `task` (None: none runs) and wait until it has ended; an error it ended with
    other than its cancellation raises."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
