"""General outages (BEYOND.md, OUTAGES.md, UPSTREAM.md "Zones, routers, outages"): the router
catalogue, the outages now active, and the notices of their flips (detector.py).

The catalogue (`GET api/router/`, with each router's `falla_general` flag) is one cached
resource (cache.py: refresh ahead, single flight, shared store) kept warm by a periodic job,
with a lifetime of OUTAGE_CACHE_SECONDS. A flag a customer hears is never older than that: a
copy past its lifetime is not served (stale-if-error does not apply here), it is loaded
again, and a failed load is an upstream error, never "no outage". An empty catalogue after a
whole one that listed routers is such a failed load (`_check_whole`): the copy before it
stands until it ages out, the outages known stay active, and readers get the error.

A client's router comes from its row (`ClientRecord.router_id`); on accounts whose rows do not
carry it, from the one-client endpoint, remembered per service for CLIENT_CACHE_SECONDS.

The outages now active (`current`: `GET /api/v1/outages`, the MCP tool, the ticket hold) are
the detector's state for a copy of the catalogue at most OUTAGE_CACHE_SECONDS old: the same
outages, with the same ids, as the notices announce.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from typing import TYPE_CHECKING, Any

from isp_gateway.kit import deadline, tasks
from isp_gateway.kit.cache import CachedResource
from isp_gateway.kit.errors import UpstreamError, UpstreamUnavailable
from isp_gateway.kit.storage import LockTimeout
from isp_gateway.outages.detector import OutageDetector, State
from isp_gateway.upstream.routers import Router, fetch_client_router, fetch_routers

if TYPE_CHECKING:
    from isp_gateway.clients.service import ClientService
    from isp_gateway.notices.service import Notices
    from isp_gateway.outages.events import Outage
    from isp_gateway.parts import Parts

log = logging.getLogger("isp_gateway.outages")

# How many routers the last whole catalogue listed (no expiry: it outlives the cached copy
# and a restart), so that an empty read is known for a failed one.
WHOLE_KEY = "outages:catalogue"


def _index(value: Any) -> dict[int, Router]:
    routers = [Router.model_validate(row) for row in value or []]
    return {router.router_id: router for router in routers}


class OutageService:
    def __init__(self, parts: Parts, *, clients: ClientService, notices: Notices) -> None:
        self.settings, self.store, self.gateway = parts.settings, parts.store, parts.gateway
        self.ttl = float(self.settings.OUTAGE_CACHE_SECONDS)
        self.catalogue: CachedResource[dict[int, Router]] = parts.lists.resource(
            "routers",
            self._load,
            _index,
            ttl=self.ttl,
            # Kept a little past its lifetime only so a refresh can replace it; never served.
            # Its refreshes spend the upstream budget like any list kept warm (planned). Should
            # the plan space them out, `router` still reads a copy past OUTAGE_CACHE_SECONDS
            # again (interactive) before a customer hears of an outage.
            stale_ttl=self.ttl,
        )
        self.detector = OutageDetector(
            parts, catalogue=self.catalogue, clients=clients, notices=notices
        )
        self._detecting: asyncio.Task[None] | None = None
        self._blank = False  # an empty catalogue refused: said once while it lasts

    async def start(self) -> None:
        """Keep the catalogue fresh and compare each copy, in the background (start-up does
        not wait)."""
        self.catalogue.start()
        self._detecting = asyncio.create_task(self.detector.run())

    async def aclose(self) -> None:
        await tasks.stop(self._detecting)
        await self.catalogue.aclose()

    async def _load(self, background: bool) -> list[dict[str, Any]]:
        routers = await fetch_routers(self.gateway, background=background)
        await self._check_whole(len(routers))
        return [router.model_dump() for router in routers]

    async def _check_whole(self, count: int) -> None:
        """Refuse an empty catalogue after a whole one that was not (UpstreamUnavailable).

        An empty page is a short read (CALLERS.md 2), and `[]` or `{"count": 0}` with
        nothing in it is no proof that every router is gone: published, it would end every
        active outage, and the next whole read would announce them again under new ids. A
        catalogue that merely shrinks is taken: it still shows the flags of the routers it
        lists (holding it would hide them), and routers are removed for real."""
        previous = await self.store.get(WHOLE_KEY)
        known = int(previous.get("routers", 0)) if isinstance(previous, dict) else 0
        if count == 0:
            if not known:
                # A store that predates the key: its active outages say there were routers.
                known = len((await self.detector.known() or {}).get("active") or {})
            if known:
                if not self._blank:
                    log.warning(
                        "router catalogue read empty, the last whole one had %d router(s): "
                        "a failed read, not taken; active outages stand until a whole read",
                        known,
                    )
                self._blank = True
                raise UpstreamUnavailable()
        elif self._blank:
            log.info("router catalogue whole again (%d router(s))", count)
        self._blank = False
        if count != known:
            await self.store.set(WHOLE_KEY, {"routers": count})

    async def router(self, router_id: int) -> Router | None:
        """The router with its outage flag read within OUTAGE_CACHE_SECONDS; None when the
        catalogue does not list it. Upstream failures raise."""
        snapshot = await self.catalogue.get()
        if time.time() - snapshot.loaded_at >= self.ttl:
            snapshot = await self.catalogue.load_now()
        return snapshot.value.get(router_id)

    async def router_of(self, service_id: int, from_row: int | None) -> int | None:
        """The client's router id: from its row, else from the one-client endpoint (once per
        CLIENT_CACHE_SECONDS per service); None when the upstream names none."""
        if from_row is not None:
            return from_row
        key = f"outages:router-of:{service_id}"
        known = await self.store.get(key)
        if isinstance(known, dict):
            router_id = known.get("router_id")
            return router_id if isinstance(router_id, int) else None
        # None also when this endpoint does not know a client the list knew: no router.
        router_id = await fetch_client_router(self.gateway, service_id)
        await self.store.set(key, {"router_id": router_id}, ttl=self.settings.CLIENT_CACHE_SECONDS)
        return router_id

    # -- the outages now active -------------------------------------------------------------

    async def current(self) -> list[Outage]:
        """The active outages, oldest first, for a catalogue copy at most
        OUTAGE_CACHE_SECONDS old (one interactive load across workers when the shared copy is
        older). Upstream failures raise."""
        snapshot = await self.catalogue.recent(self.ttl)
        # Compared in a task of its own: not cancelled with a client that goes away (it may
        # hold the lock and have queued notices), with no caller or request of its own (the
        # outage's audit event is nobody's request), and waited for only while the request
        # has time left (then 502, or the last known state for the ticket hold).
        task = asyncio.create_task(
            self.detector.compare(snapshot.value, snapshot.loaded_at),
            context=contextvars.Context(),
        )
        try:
            state: State | None = await deadline.bounded(task)
        except LockTimeout:
            state = await self.detector.known()  # another worker compares right now
        return _active(state)

    async def known(self) -> list[Outage]:
        """The active outages as last compared (no upstream call)."""
        return _active(await self.detector.known())

    async def outage_of(self, service_id: int, from_row: int | None) -> Outage | None:
        """The active outage on the service's router, or None. With the catalogue out of
        reach, the outages last compared stand (a ticket hold does not fail on it)."""
        try:
            active = await self.current()
        except UpstreamError as exc:
            log.warning("outage check from the last known state (%s)", exc.action)
            active = await self.known()
        if not active:
            return None  # nothing to look up: no call for the router
        try:
            router_id = await self.router_of(service_id, from_row)
        except UpstreamError as exc:
            # The spec's behaviour (a ticket) rather than a failure on a question the hold
            # adds: the router of this service cannot be read now.
            log.warning("router of service %d unknown (%s); not held", service_id, exc.action)
            return None
        return next((o for o in active if o["router_id"] == router_id), None)


def _active(state: State | None) -> list[Outage]:
    outages = list(((state or {}).get("active") or {}).values())
    return sorted(outages, key=lambda o: (float(o["since"]), int(o["router_id"])))
