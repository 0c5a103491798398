"""This process's derived structure of a whole list kept warm (an index): built off the event
loop once per loaded base, however many requests ask for it at the same time, and patched up
to the revision the list's patch log (patches.py) has reached."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from isp_gateway.kit.patches import Local, PatchLog

log = logging.getLogger("isp_gateway.cache")

D = TypeVar("D")


class LocalCopy(Generic[D]):
    def __init__(self, name: str, derive: Callable[[Any], D], patches: PatchLog[D]) -> None:
        self._name = name  # the list's store key, for log lines
        self._derive = derive
        self._patches = patches
        # The structure this process holds: base load time, revision, derived.
        self.held: Local[D] | None = None
        self._deriving: asyncio.Future[D] | None = None
        self._deriving_at: float | None = None
        self.derives = 0  # full builds of the derived structure in this process

    def build(self, value: Any) -> D:
        self.derives += 1
        return self._derive(value)

    def deriving(self, loaded_at: float | None) -> bool:
        """Whether the base loaded at `loaded_at` is being derived here already."""
        return (
            loaded_at is not None
            and self._deriving is not None
            and (self._deriving_at == loaded_at)
        )

    def pending(self) -> asyncio.Future[D] | None:
        """The build in flight, if any (for a shutdown)."""
        return self._deriving

    def hold(self, loaded_at: float, derived: D, raw_log: Any) -> None:
        """Hold a base this process built itself (a load), with the log written for it."""
        self.held = local = Local(loaded_at, 0, derived)
        self._patches.apply(local, raw_log)

    async def adopt(self, loaded_at: float, value: Any) -> None:
        """Build and hold a base another worker loaded, off the event loop, unless this
        process holds that one or a newer one; then apply its patch log."""
        if self.held is not None and self.held.at >= loaded_at:
            return
        derived = await asyncio.to_thread(self.build, value)
        if self.held is None or self.held.at < loaded_at:  # a load here may have won
            self.held = Local(loaded_at, 0, derived)
            await self.catch_up()

    async def catch_up(self, target: int | None = None) -> Local[D] | None:
        """Bring the held structure up to the logged revisions (one small store read)."""
        local = self.held
        if local is None or self._patches.patch is None:
            return local
        raw = await self._patches.read()
        self._patches.apply(local, raw)
        lost = raw is None or (isinstance(raw, dict) and raw.get("base") == local.at)
        if target is not None and local is self.held and local.rev < target and lost:
            # The log lost items it should hold (evicted or expired): they cannot be
            # applied; the next load includes them. Do not re-read the log on every request.
            log.warning(
                "patch log of %s is behind its stamp; waiting for the next load", self._name
            )
            local.rev = target
        return self.held

    async def derived(self, loaded_at: float, value: Any) -> D:
        """The structure for the base loaded at `loaded_at`, built off the event loop (an
        index of 200,000 clients takes seconds) and once however many requests ask for it
        at the same time."""
        local = self.held
        if local is not None and local.at == loaded_at:
            return local.derived
        task = self._deriving
        if task is None or self._deriving_at != loaded_at:
            self._deriving_at = loaded_at
            task = self._deriving = asyncio.ensure_future(asyncio.to_thread(self.build, value))
        try:
            derived = await asyncio.shield(task)
        finally:
            if task.done() and self._deriving is task:
                self._deriving = None
        local = self.held
        if local is None or local.at != loaded_at:
            self.held = local = Local(loaded_at, 0, derived)
        return local.derived
