"""General outages (BEYOND.md, UPSTREAM.md "Zones, routers, outages"): the router catalogue.

The catalogue (`GET api/router/`, with each router's `falla_general` flag) is one cached
resource (cache.py: refresh ahead, single flight, shared store) kept warm by a periodic job,
with a lifetime of OUTAGE_CACHE_SECONDS. A flag a customer hears is never older than that: a
copy past its lifetime is not served (stale-if-error does not apply here), it is loaded
again, and a failed load is an upstream error, never "no outage".

A client's router comes from its row (`ClientRecord.router_id`); on accounts whose rows do not
carry it, from the one-client endpoint, remembered per service for CLIENT_CACHE_SECONDS.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from isp_gateway.kit.cache import CachedResource
from isp_gateway.upstream.routers import Router, fetch_client_router, fetch_routers

if TYPE_CHECKING:
    from isp_gateway.kit.cache import Lists
    from isp_gateway.kit.storage import Store
    from isp_gateway.settings import Settings
    from isp_gateway.upstream.gateway import UpstreamGateway

    pass


def _index(value: Any) -> dict[int, Router]:
    routers = [Router.model_validate(row) for row in value or []]
    return {router.router_id: router for router in routers}


class OutageService:
    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        gateway: UpstreamGateway,
        lists: Lists,
    ) -> None:
        self.settings, self.store, self.gateway = settings, store, gateway
        self.ttl = float(settings.OUTAGE_CACHE_SECONDS)
        self.catalogue: CachedResource[dict[int, Router]] = lists.resource(
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

    async def start(self) -> None:
        """Keep the catalogue fresh in the background (start-up does not wait)."""
        self.catalogue.start()

    async def aclose(self) -> None:
        await self.catalogue.aclose()

    async def _load(self, background: bool) -> list[dict[str, Any]]:
        routers = await fetch_routers(self.gateway, background=background)
        return [router.model_dump() for router in routers]

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
