"""The patch log of a whole list kept warm (cache.py): single-item changes that never rewrite
the list.

An update goes to a small log for the current base (the loaded list), numbered by revision,
and the small stamp key carries (base, revision). A process behind by a few revisions reads
the log and applies the missing items with the list's `patch` callback; it never rebuilds
its structure for them.

Store keys (JSON): `cache:<name>:at` the stamp {"at": loaded_at, "rev": n};
`cache:<name>:patches` {"base": loaded_at | None, "items": [{"rev": n, "item": ...}]}. The
log and the stamp are written together under the lock `cache:<name>:patches`, log first, so
a reader that sees revision n finds item n in the log. A new base starts a new log carrying
the items written after its load began (its fetch may have missed them); see `carry`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from isp_gateway.kit.storage import Store

D = TypeVar("D")

Stamp = tuple[float | None, int]  # (base load time or None when nothing is cached, revision)


@dataclass
class Local(Generic[D]):
    """A process's derived structure: built from base `at`, patched up to `rev`."""

    at: float
    rev: int
    derived: D


def stamp_of(raw: Any) -> Stamp | None:
    if isinstance(raw, dict) and "at" in raw:
        return float(raw["at"]), int(raw.get("rev", 0))
    return None


def log_items(raw: Any, base: float | None) -> list[dict[str, Any]] | None:
    """The items of a patch log when it belongs to `base`, else None."""
    if not isinstance(raw, dict) or raw.get("base") != base:
        return None
    items: list[dict[str, Any]] = raw.get("items") or []
    return items


class PatchLog(Generic[D]):
    """The stamp and the patch log of the list `cache:<key>` in the store."""

    def __init__(self, store: Store, key: str, patch: Callable[[D, Any], D] | None) -> None:
        self._store = store
        self.stamp_key = f"cache:{key}:at"
        self.log_key = f"cache:{key}:patches"
        # `patch(derived, item)` applies one logged item to a derived structure.
        self.patch = patch

    def lock(self) -> AbstractAsyncContextManager[None]:
        return self._store.lock(f"lock:{self.log_key}", timeout=30)

    async def stamp(self) -> Stamp | None:
        return stamp_of(await self._store.get(self.stamp_key))

    async def read(self) -> Any:
        """The raw log (one small store read)."""
        return await self._store.get(self.log_key)

    def apply(self, local: Local[D] | None, raw_log: Any) -> None:
        """Apply the log's items `local` lacks, when the log is for its base. Synchronous
        (no await between reading the revision and applying), so concurrent catch-ups in one
        process never apply an item twice."""
        if local is None or self.patch is None:
            return
        items = log_items(raw_log, local.at)
        if items is None:
            return
        for entry in items:
            rev = int(entry["rev"])
            if rev > local.rev:
                local.derived = self.patch(local.derived, entry["item"])
                local.rev = rev

    @staticmethod
    def carry(raw_log: Any, since: Stamp) -> list[dict[str, Any]]:
        """The items of the current log a load that started at `since` may have missed,
        renumbered for the new base: those after `since`, or all of a log for another base
        (re-applying an item the list already holds changes nothing)."""
        if not isinstance(raw_log, dict):
            return []
        items: list[dict[str, Any]] = raw_log.get("items") or []
        if raw_log.get("base") == since[0]:
            items = [i for i in items if int(i["rev"]) > since[1]]
        return [{"rev": n, "item": i["item"]} for n, i in enumerate(items, start=1)]

    async def start_base(self, loaded_at: float, since: Stamp, ttl: float) -> dict[str, Any]:
        """A new base's log, carrying what its load may have missed, and its stamp; written
        under the log's lock by the caller, after the base itself. Returns the new log."""
        carried = self.carry(await self.read(), since)
        new_log = {"base": loaded_at, "items": carried}
        await self._store.set(self.log_key, new_log, ttl=ttl)
        await self._store.set(self.stamp_key, {"at": loaded_at, "rev": len(carried)}, ttl=ttl)
        return new_log

    async def append(self, item: Any, lifetime: float) -> dict[str, Any]:
        """Append one item to the current base's log under a new revision (under the log's
        lock); `lifetime`: how long a base is kept from its load. Returns the new log.

        With nothing cached yet the item is still logged (base None): a first load in
        flight, whose fetch may predate the write, carries it into its new log."""
        async with self.lock():
            stamp = await self.stamp()
            base, rev = stamp if stamp is not None else (None, 0)
            items = log_items(await self.read(), base) or []
            if items:
                rev = max(rev, int(items[-1]["rev"]))
            new_log = {"base": base, "items": [*items, {"rev": rev + 1, "item": item}]}
            ttl = lifetime if base is None else max(1.0, lifetime - (time.time() - base))
            await self._store.set(self.log_key, new_log, ttl=ttl)
            if base is not None:
                await self._store.set(self.stamp_key, {"at": base, "rev": rev + 1}, ttl=ttl)
        return new_log
