"""Outage flips (OUTAGES.md 3, 5): which routers' general-outage flags went up or down, once.

The router catalogue is one shared cached list (service.py), refreshed every
OUTAGE_CACHE_SECONDS by whichever worker's turn it is. Each worker looks at its load time
every DETECT_SECONDS (one small store read); a copy newer than the one last compared is
compared with the known state under the store lease `outages:detect`, so with several workers
or replicas on one Redis exactly one of them announces a flip: the others then find the state
already at that copy (or newer) and do nothing. The lease is renewed while the comparison
works (it may wait for the client list), so no other worker compares meanwhile; a worker that
stalled past it (or whose store lost it) finds it gone, or the state moved on, right before it
publishes, and drops its work: another worker's comparison stands, and one flip is never
announced twice under two outage ids. The known state lives in the store
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
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from isp_gateway.kit import tasks
from isp_gateway.kit.errors import ServiceError, StoreUnavailable, UpstreamError
from isp_gateway.kit.storage import LockTimeout
from isp_gateway.outages.events import clean, ended_event, outage_id, started_event

if TYPE_CHECKING:
    from isp_gateway.clients.index import ClientIndex
    from isp_gateway.clients.service import ClientService
    from isp_gateway.kit.cache import CachedResource
    from isp_gateway.kit.storage import Store
    from isp_gateway.notices.service import Notices
    from isp_gateway.outages.events import Outage
    from isp_gateway.parts import Parts
    from isp_gateway.upstream.routers import Router

log = logging.getLogger("isp_gateway.outages")

STATE_KEY = "outages:state"
LEASE_KEY = "outages:detect"
# The comparison's lease, renewed every RENEW_SECONDS while it works: a worker that dies
# mid-way frees it within LEASE_SECONDS (the sender's figures, notices/sender.py).
LEASE_SECONDS = 15.0
RENEW_SECONDS = 5.0
LEASE_WAIT_SECONDS = 10.0
LEASE_POLL_SECONDS = 0.1
DETECT_SECONDS = 1.0
# A first start may find the client list still loading: the affected services are waited for
# this long, once per comparison whatever the number of routers, then announced as unknown
# rather than holding the notices back.
CLIENTS_WAIT_SECONDS = 20.0

State = dict[str, Any]


def _covers(state: State | None, loaded_at: float) -> bool:
    return state is not None and float(state.get("at", 0)) >= loaded_at


class LeaseLost(LockTimeout):
    """The comparison's lease passed to another worker (this one stalled past LEASE_SECONDS,
    or the store lost it), or the state moved on meanwhile: its work is dropped unpublished."""


class _Lease:
    """`outages:detect` held by one comparison (Store.lease, an owner of its own)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.owner = uuid.uuid4().hex
        self.lost = False

    async def take(self) -> None:
        deadline = time.monotonic() + LEASE_WAIT_SECONDS
        while not await self.store.lease(LEASE_KEY, self.owner, LEASE_SECONDS):
            if time.monotonic() >= deadline:
                raise LockTimeout(LEASE_KEY)
            await asyncio.sleep(LEASE_POLL_SECONDS)

    async def keep(self) -> None:
        """Renew it until cancelled; a renewal refused means another worker has it."""
        while not self.lost:
            await asyncio.sleep(RENEW_SECONDS)
            # The store away: `confirm` will tell.
            with contextlib.suppress(StoreUnavailable):
                if not await self.store.lease(LEASE_KEY, self.owner, LEASE_SECONDS):
                    self.lost = True

    async def confirm(self) -> None:
        """Still ours, renewed now in the same step (LeaseLost otherwise)."""
        if self.lost or not await self.store.lease(LEASE_KEY, self.owner, LEASE_SECONDS):
            self.lost = True
            raise LeaseLost(LEASE_KEY)

    async def give_up(self) -> None:
        if not self.lost:
            # Left to expire should the store be away.
            with contextlib.suppress(StoreUnavailable):
                await self.store.lease(LEASE_KEY, self.owner, 0)


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
                # Another worker compares a long while (its result is read next time), or
                # this one lost the lease on the way (said where it was found).
                continue
            except (StoreUnavailable, UpstreamError) as exc:
                if self._failing != exc.action:
                    log.warning("outage detection skipped (%s); trying again", exc.action)
                self._failing = exc.action
            except Exception:
                log.exception("outage detection failed; trying again")

    async def compare(self, routers: dict[int, Router], loaded_at: float) -> State:
        """The state for the catalogue copy loaded at `loaded_at`: compared now, under the
        lease, unless the store's state already covers that copy."""
        state = await self.known()
        if not _covers(state, loaded_at):
            async with self._leased() as lease:
                state = await self.known()
                if not _covers(state, loaded_at):
                    state = await self._flip(state, routers, loaded_at, lease)
        assert state is not None
        self.compared_at = max(self.compared_at, float(state["at"]))
        return state

    @contextlib.asynccontextmanager
    async def _leased(self) -> AsyncIterator[_Lease]:
        lease = _Lease(self.store)
        await lease.take()
        keeping = asyncio.create_task(lease.keep())
        began = time.monotonic()
        try:
            yield lease
        except LeaseLost:
            log.warning(
                "outage comparison dropped after %.0f s: another worker took it over "
                "(this one stalled past the %.0f s lease, or the store lost it)",
                time.monotonic() - began,
                LEASE_SECONDS,
            )
            raise
        finally:
            await tasks.stop(keeping)
            await lease.give_up()

    async def _flip(
        self, state: State | None, routers: dict[int, Router], at: float, lease: _Lease
    ) -> State:
        previous = state or {}
        active: dict[str, Outage] = dict(previous.get("active") or {})
        last: dict[str, str] = dict(previous.get("last") or {})
        flagged = {str(r.router_id): r for r in routers.values() if r.outage}
        started: list[Outage] = []
        clients: tuple[ClientIndex | None, str] | None = None
        for key, router in flagged.items():
            known = active.get(key)
            if known is not None:
                known["router_name"] = router.name or known.get("router_name")
                known["description"] = clean(router.outage_description)
                continue
            if clients is None:  # waited for once, whatever the number of routers
                clients = await self._clients()
            service_ids, zone_ids, count = await self._affected(router.router_id, *clients)
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
        # The decision is this comparison's only while the lease is still ours and nobody
        # wrote the state since it was read: else another worker compared meanwhile (maybe a
        # newer copy, under other ids), and this work is dropped unpublished.
        await lease.confirm()
        if (await self.known() or {}).get("at") != previous.get("at"):
            raise LeaseLost(LEASE_KEY)
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

    async def _clients(self) -> tuple[ClientIndex | None, str]:
        """The client index, waited for at most CLIENTS_WAIT_SECONDS; None and why not."""
        try:
            index, _ = await asyncio.wait_for(self.clients.warm(), CLIENTS_WAIT_SECONDS)
        except StoreUnavailable:
            raise
        except (TimeoutError, ServiceError) as exc:
            return None, getattr(exc, "action", "the client list is still loading")
        return index, ""

    async def _affected(
        self, router_id: int, index: ClientIndex | None, reason: str
    ) -> tuple[list[int], list[int], int | None]:
        """(service ids, zone ids, how many) of the clients whose row names the router."""
        if index is None:
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
