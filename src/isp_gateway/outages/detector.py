"""Outage flips (OUTAGES.md 3, 5): which routers' general-outage flags went up or down, once.

The router catalogue is one shared cached list (service.py), refreshed every
OUTAGE_CACHE_SECONDS by whichever worker's turn it is. Each worker looks at its load time
every DETECT_SECONDS (one small store read); a copy newer than the one last compared is
compared with the known state under the store lock `outages:detect`, so with several workers
or replicas on one Redis exactly one of them announces a flip: the others then find the state
already at that copy (or newer) and do nothing. The known state lives in the store
(`outages:state`, no expiry), so a restart announces nothing already announced; with no state
at all (a first start) an outage already flagged is announced once.

A raised flag starts an outage: its affected services are those whose client row names the
router (the cached client list; `affected_count` None when the rows name no router at all),
its zones theirs. A cleared flag (or a router gone from the catalogue) ends it, with the same
`outage_id`. A changed description or router name is kept quietly: no event. The notices are
queued (notices/) before the state is written: a crash between the two queues them again
under the same ids, which the queue takes once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from isp_gateway.kit.errors import ServiceError, StoreUnavailable, UpstreamError
from isp_gateway.kit.storage import LockTimeout
from isp_gateway.outages.events import clean, ended_event, outage_id, started_event

if TYPE_CHECKING:
    from isp_gateway.clients.service import ClientService
    from isp_gateway.kit.cache import CachedResource
    from isp_gateway.notices.service import Notices
    from isp_gateway.outages.events import Outage
    from isp_gateway.parts import Parts
    from isp_gateway.upstream.routers import Router

log = logging.getLogger("isp_gateway.outages")

STATE_KEY = "outages:state"
LOCK_NAME = "outages:detect"
# A comparison may wait for the client list (below) and queue a few notices.
LOCK_SECONDS = 60.0
LOCK_WAIT_SECONDS = 10.0
DETECT_SECONDS = 1.0
# A first start may find the client list still loading: the affected services are waited for
# this long, then announced as unknown rather than holding the notice back.
CLIENTS_WAIT_SECONDS = 20.0

State = dict[str, Any]


def _covers(state: State | None, loaded_at: float) -> bool:
    return state is not None and float(state.get("at", 0)) >= loaded_at


class OutageDetector:
    def __init__(
        self,
        parts: Parts,
        *,
        catalogue: CachedResource[dict[int, Router]],
        clients: ClientService,
        notices: Notices,
    ) -> None:
        self.store, self.audit = parts.store, parts.audit
        self.catalogue, self.clients, self.notices = catalogue, clients, notices
        # The newest catalogue copy this worker compared (or found compared).
        self.compared_at = 0.0
        self.flips = 0  # flips this worker announced, for tests and the bench
        self._failing: str | None = None  # said once while it lasts, not every second

    async def known(self) -> State | None:
        """The state in the store, as last compared (no upstream call)."""
        state = await self.store.get(STATE_KEY)
        return state if isinstance(state, dict) else None

    async def run(self) -> None:
        """Background job: compare each new copy of the catalogue."""
        while True:
            await asyncio.sleep(DETECT_SECONDS)
            try:
                at = await self.catalogue.loaded_at()
                if at is None or at <= self.compared_at:
                    continue
                snapshot = await self.catalogue.peek()
                if snapshot is not None:
                    await self.compare(snapshot.value, snapshot.loaded_at)
                self._failing = None
            except LockTimeout:
                continue  # another worker compares a long while: its result is read next time
            except (StoreUnavailable, UpstreamError) as exc:
                if self._failing != exc.action:
                    log.warning("outage detection skipped (%s); trying again", exc.action)
                self._failing = exc.action
            except Exception:
                log.exception("outage detection failed; trying again")

    async def compare(self, routers: dict[int, Router], loaded_at: float) -> State:
        """The state for the catalogue copy loaded at `loaded_at`: compared now, under the
        lock, unless the store's state already covers that copy."""
        state = await self.known()
        if not _covers(state, loaded_at):
            lock = self.store.lock(
                LOCK_NAME, timeout=LOCK_SECONDS, blocking_timeout=LOCK_WAIT_SECONDS
            )
            async with lock:
                state = await self.known()
                if not _covers(state, loaded_at):
                    state = await self._flip(state, routers, loaded_at)
        assert state is not None
        self.compared_at = max(self.compared_at, float(state["at"]))
        return state

    async def _flip(self, state: State | None, routers: dict[int, Router], at: float) -> State:
        previous = state or {}
        active: dict[str, Outage] = dict(previous.get("active") or {})
        last: dict[str, str] = dict(previous.get("last") or {})
        flagged = {str(r.router_id): r for r in routers.values() if r.outage}
        started: list[Outage] = []
        for key, router in flagged.items():
            known = active.get(key)
            if known is not None:
                known["router_name"] = router.name or known.get("router_name")
                known["description"] = clean(router.outage_description)
                continue
            service_ids, zone_ids, count = await self._affected(router.router_id)
            new_id = outage_id(router.router_id, at, last.get(key))
            outage: Outage = {
                "outage_id": new_id,
                "router_id": router.router_id,
                "router_name": router.name,
                "description": clean(router.outage_description),
                "since": at,
                "zone_ids": zone_ids,
                "service_ids": service_ids,
                "affected_count": count,
            }
            active[key] = outage
            last[key] = new_id
            started.append(outage)
        ended = [active.pop(key) for key in sorted(active) if key not in flagged]
        announced = [started_event(o, at) for o in started] + [ended_event(o, at) for o in ended]
        counts = [await self.notices.publish(*event) for event in announced]
        new_state = {"version": 1, "at": at, "active": active, "last": last}
        await self.store.set(STATE_KEY, new_state)
        self.flips += len(announced)
        for outage, kind, notices in zip(
            [*started, *ended],
            ["started"] * len(started) + ["ended"] * len(ended),
            counts,
            strict=True,
        ):
            await self._record(outage, kind, notices)
        return new_state

    async def _affected(self, router_id: int) -> tuple[list[int], list[int], int | None]:
        """(service ids, zone ids, how many) of the clients whose row names the router."""
        try:
            index, _ = await asyncio.wait_for(self.clients.warm(), CLIENTS_WAIT_SECONDS)
        except StoreUnavailable:
            raise
        except (TimeoutError, ServiceError) as exc:
            reason = getattr(exc, "action", "the client list is still loading")
            log.warning("outage on router %d: its services are unknown (%s)", router_id, reason)
            return [], [], None
        # Off the event loop: a scan of a large list takes a while (bench/outages.py).
        clients = await asyncio.to_thread(index.on_router, router_id)
        if clients is None:
            return [], [], None
        service_ids = sorted({c["service_id"] for c in clients})
        zone_ids = sorted({c["zone_id"] for c in clients if c["zone_id"] is not None})
        return service_ids, zone_ids, len(service_ids)

    async def _record(self, outage: Outage, kind: str, notices: int) -> None:
        log.warning(
            "general outage %s on router %s (%s): %s; %d notice(s) queued",
            outage["outage_id"],
            outage["router_id"],
            outage.get("router_name") or "?",
            kind,
            notices,
        )
        # The router and the second it was first seen name the outage (the audit would mask
        # the outage id's run of digits).
        details = {
            "router_id": outage["router_id"],
            "since": int(float(outage["since"])),
            "affected_count": outage.get("affected_count"),
            "notices": notices,
        }
        if kind == "ended":
            details["duration_seconds"] = max(0, round(time.time() - float(outage["since"])))
        try:
            await self.audit.record("outage", kind, details=details)
        except ServiceError as exc:
            log.warning("outage %s: audit event not stored (%s)", outage["outage_id"], exc.action)
