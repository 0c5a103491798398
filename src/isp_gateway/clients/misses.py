"""Lookup misses (CALLERS.md 2 "The backend budget"): a value the cached list does not know
is asked upstream, because a customer added since the last load must still be found.

- One upstream question per (kind, value) however many lookups of this process wait for it.
- With a loaded (complete) list, a value is asked about at most once per
  MISS_RECHECK_SECONDS across workers: the slot is taken in the store before the call.
- A confirmed miss is remembered for NEGATIVE_CACHE_SECONDS (the only bound before the first
  load).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from isp_gateway.kit.actions import Action
from isp_gateway.kit.errors import NotFound, ServiceError, UpstreamError, UpstreamUnauthorized
from isp_gateway.upstream import clients as upstream
from isp_gateway.upstream.clients import Client, ClientRecord

if TYPE_CHECKING:
    from isp_gateway.kit.storage import Store
    from isp_gateway.settings import Settings
    from isp_gateway.upstream.gateway import UpstreamGateway

MSG_NOT_FOUND = "Client not found"
MSG_NOT_FOUND_ES = "Cliente no encontrado"


def client_not_found(message: str = MSG_NOT_FOUND) -> NotFound:
    return NotFound(message, action=Action.CLIENT_NOT_FOUND)


def unable_to_fetch() -> ServiceError:
    # Spec 5.2: our key was rejected; say nothing more (the details are in the log).
    return ServiceError(
        "Unable to fetch client data", action=Action.UPSTREAM_REFUSED_CLIENT_FETCH, status_code=502
    )


def miss_key(kind: str, key: str) -> str:
    """A confirmed miss of one value, remembered for NEGATIVE_CACHE_SECONDS."""
    return f"clients:miss:{kind}:{key}"


def recheck_key(kind: str, key: str) -> str:
    """The slot of one value's upstream question, taken for MISS_RECHECK_SECONDS."""
    return f"clients:recheck:{kind}:{key}"


class Misses:
    """The upstream questions of lookups that missed the cached list."""

    def __init__(self, *, settings: Settings, store: Store, gateway: UpstreamGateway) -> None:
        self.settings, self.store, self.gateway = settings, store, gateway
        # Upstream queries in flight, by (kind, value): a bot retrying an unknown document,
        # or many asking at once, costs one upstream call, not N.
        self._queries: dict[tuple[str, str], asyncio.Future[list[ClientRecord]]] = {}

    async def aclose(self) -> None:
        pending = list(self._queries.values())
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def matches(
        self,
        kind: str,
        key: str,
        upstream_value: str,
        accept: Callable[[Client], bool],
        *,
        complete: bool,
    ) -> list[ClientRecord]:
        """The upstream's records of one value the cached list missed (those `accept`
        takes), or NotFound. `complete`: a whole list is loaded (a short read never is)."""
        store = self.store
        missed = miss_key(kind, key)
        if await store.get(missed) is not None:
            raise client_not_found()
        # A miss of a complete index asks the upstream about that value at most once per
        # MISS_RECHECK_SECONDS, across all workers: the slot is taken in the store before
        # the call, so a loop of the same miss, or the same miss on two workers at once,
        # costs one call (CALLERS.md 2).
        recheck = self.settings.MISS_RECHECK_SECONDS
        slot = recheck_key(kind, key)
        claimed = False
        if complete and recheck > 0:
            claimed = await store.set_if_absent(slot, True, ttl=recheck)
            if not claimed:
                raise client_not_found()
        try:
            records = await self.query(kind, upstream_value)
        except UpstreamError as exc:
            if claimed:
                # A failed read is no answer about the value: the next lookup asks again,
                # never "not found" on its strength.
                await store.delete(slot)
            if isinstance(exc, UpstreamUnauthorized):
                raise unable_to_fetch() from None
            raise
        found = [r for r in records if accept(r["client"])]
        if not found:
            if self.settings.NEGATIVE_CACHE_SECONDS > 0:
                await store.set(missed, True, ttl=self.settings.NEGATIVE_CACHE_SECONDS)
            raise client_not_found()
        return found

    async def query(self, kind: str, value: str) -> list[ClientRecord]:
        """One upstream query per (kind, value) however many lookups wait for it."""
        key = (kind, value)
        future = self._queries.get(key)
        if future is None:
            future = asyncio.ensure_future(upstream.query_clients(self.gateway, kind, value))
            self._queries[key] = future

            def done(task: asyncio.Future[list[ClientRecord]]) -> None:
                if self._queries.get(key) is task:
                    del self._queries[key]
                if not task.cancelled():
                    task.exception()  # retrieved here: every waiter may have gone away

            future.add_done_callback(done)
        # shield: a caller that disconnects must not cancel the query others wait for.
        return await asyncio.shield(future)
