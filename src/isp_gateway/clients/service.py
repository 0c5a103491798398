"""Clients (spec 4.3-4.5): the cached list and its index, list, search, lookups, and the
records other features read (accounts, diagnose, tickets, pings). Verify and resolve are in
identity.py, the update in update.py; both build on this service.

Everything is served from one cached client list (refresh-ahead, single flight,
stale-if-error; see cache.py) and its in-process index. A lookup miss asks the upstream
directly (misses.py), because a customer added since the last load must still be found.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from isp_gateway.clients.index import ClientIndex, document_key, pack_lines, pack_records
from isp_gateway.clients.misses import (
    Misses,
    Question,
    client_not_found,
    document_values,
    unable_to_fetch,
)
from isp_gateway.clients.phones import MIN_PHONE_DIGITS, field_phones, normalize_phone
from isp_gateway.kit.actions import Action
from isp_gateway.kit.cache import CachedResource
from isp_gateway.kit.errors import (
    InvalidInput,
    NotFound,
    ServiceError,
    UpstreamError,
    UpstreamRateLimited,
    UpstreamUnauthorized,
)
from isp_gateway.kit.trim import release_free_memory
from isp_gateway.upstream import clients as upstream
from isp_gateway.upstream.clients import Client, ClientRecord
from isp_gateway.web.params import MAX_SERVICE_ID_DIGITS, parse_service_id

if TYPE_CHECKING:
    from isp_gateway.parts import Parts

log = logging.getLogger("isp_gateway.clients")

DOCUMENT = re.compile(r"[A-Za-z0-9]{3,20}")
MAX_SEARCH_LIMIT = 200


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Decoding and indexing a whole client list allocates millions of objects, and the
    collector's full passes over them cost about half of the build; nothing built here
    forms reference cycles, so collection waits until the build is done."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _pack_page(records: list[ClientRecord]) -> str:
    # Only while a page is packed: a load paused on the upstream budget can last minutes,
    # and the collector must run for everything else the process does meanwhile.
    with _gc_paused():
        return pack_lines(records)


def _alone(client: Client | None) -> tuple[Client, list[int] | None] | None:
    """A service-id hit: no other services to name."""
    return None if client is None else (client, None)


@dataclass(frozen=True)
class Found:
    client: Client
    stale: bool = False
    # Set when the client was read from the upstream just now (a miss of the cached list).
    record: ClientRecord | None = None
    # By document or phone: the other services sharing the value (CALLERS.md 2), ascending.
    others: list[int] | None = None


# States a customer must not be told from an old copy (BEYOND.md "Service state").
CONFIRMED_STATES = frozenset({"suspended", "cancelled"})


class ClientService:
    def __init__(self, parts: Parts) -> None:
        self.settings = settings = parts.settings
        self.store, self.gateway = parts.store, parts.gateway
        self.cache: CachedResource[ClientIndex] = parts.lists.resource(
            "clients",
            self._load,
            self._index,
            ttl=settings.CLIENT_CACHE_SECONDS,
            patch=self._patch,
            # A first load of a large list takes minutes within the budget: a request that
            # needs the whole list is told so (503 `loading`, Retry-After), never a 502.
            answers_loading="clients",
        )
        self._tasks: set[asyncio.Task[None]] = set()
        self.misses = Misses(parts, learned=self._learned)

    async def start(self) -> None:
        """Warm the cache and keep it fresh in the background (start-up does not wait)."""
        self.cache.start()

    async def aclose(self) -> None:
        pending: list[asyncio.Future[Any]] = [*self._tasks]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await self.misses.aclose()
        await self.cache.aclose()

    # -- the cache -------------------------------------------------------------------

    async def _load(self, background: bool) -> dict[str, Any]:
        # Each page is mapped and packed as it arrives, so a load never holds the raw rows
        # of the whole list (hundreds of megabytes at 200,000 clients).
        chunks = await upstream.fetch_all_clients_as(
            self.gateway, _pack_page, background=background
        )
        return pack_records(chunks)

    def _index(self, value: Any) -> ClientIndex:
        s = self.settings
        records = (value or {}).get("records") or []
        if records and "router_id" not in records[0]:
            for record in records:
                upstream.complete_record(record)
        with _gc_paused():
            index = ClientIndex(
                value, s.PHONE_COUNTRY_CODE, s.PHONE_NATIONAL_LENGTH, s.ACTIVE_CLIENT_STATES
            )
        # The cached list is millions of long-lived objects; left in the collector's
        # generations, every full collection walks them all and stalls requests for tens of
        # milliseconds. Frozen, they are skipped (they are still freed by reference count
        # when the next generation replaces them).
        gc.freeze()
        # The load's parsed pages and the build's temporaries are freed by now (this runs in
        # the loader's or the adopter's thread): give their memory back.
        release_free_memory()
        return index

    async def warm(self) -> tuple[ClientIndex, bool]:
        """The index, loading it if needed; upstream failures mapped for client endpoints."""
        try:
            snapshot = await self.cache.get()
        except UpstreamUnauthorized:
            raise unable_to_fetch() from None
        return snapshot.value, snapshot.stale

    @staticmethod
    def _patch(index: ClientIndex, record: ClientRecord) -> ClientIndex:
        """Apply one logged record (an update, or a new customer) to the index in place."""
        index.replace(upstream.complete_record(record))
        return index

    async def remember(self, record: ClientRecord) -> None:
        # Logged as a patch of the cached list: every worker applies it to its index; the
        # whole list is not rewritten, and no worker rebuilds its index for it.
        await self.cache.update(record)

    # -- list and search -------------------------------------------------------------

    async def list_active(self) -> tuple[bytes, bool]:
        """The active clients as a pre-serialised JSON array, and the stale flag."""
        try:
            snapshot = await self.cache.get()
        except UpstreamUnauthorized:
            raise unable_to_fetch() from None
        except UpstreamRateLimited:
            raise
        except UpstreamError:
            raise ServiceError(variant="clients_list") from None
        return snapshot.value.active_json(), snapshot.stale

    async def search(self, q: str | None, limit: int) -> tuple[bytes, int, int, bool]:
        """The matching clients as a pre-serialised JSON array, how many, how many match in
        all, and the stale flag."""
        query = (q or "").strip()
        if not query:
            raise InvalidInput(variant="q_required")
        index, stale = await self.warm()
        payload, count, total = index.search_json(query, max(1, min(limit, MAX_SEARCH_LIMIT)))
        return payload, count, total, stale

    # -- lookups ---------------------------------------------------------------------

    async def _lookup(
        self,
        from_index: Callable[[ClientIndex], tuple[Client, list[int] | None] | None],
        *questions: Question,
    ) -> Found:
        """The index's answer, else the upstream's to the first of `questions` that finds
        the client (each a value of its own, with its own miss memory); NotFound when none
        does."""
        snapshot = await self.cache.peek()
        if snapshot is not None:
            hit = from_index(snapshot.value)
            if hit is not None:
                return Found(hit[0], snapshot.stale, others=hit[1])
        *before, last = questions
        for question in before:
            try:
                matches = await self.misses.matches(question, complete=snapshot is not None)
                break
            except NotFound:
                continue
        else:
            matches = await self.misses.matches(last, complete=snapshot is not None)
        record = self._choose(matches)
        others = None
        if last.kind != "service_id":
            chosen = record["client"]["service_id"]
            others = sorted({r["client"]["service_id"] for r in matches} - {chosen})
        return Found(record["client"], record=record, others=others)

    def _choose(self, matches: list[ClientRecord]) -> ClientRecord:
        """The index's choice among clients sharing a key: an active one, then the lowest id."""
        active = self.settings.ACTIVE_CLIENT_STATES
        return min(
            matches,
            key=lambda r: (r["client"]["payment_status"] not in active, r["client"]["service_id"]),
        )

    def _learned(self, matches: list[ClientRecord]) -> None:
        """A client the cached list did not know yet, found by a question upstream: kept for
        the next lookups (once per question, whoever waited for it), in the background (the
        cache lock may be held by a reload)."""
        task = asyncio.create_task(self.remember(self._choose(matches)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def fresh_hit_body(self, kind: str, raw: str) -> bytes | None:
        """The rendered `client_found` answer when a lookup hits the fresh, warm index;
        None for anything else (bad input, a miss, a cold or ageing cache), which the
        regular route then handles with every rule. Used by the lookup fast path."""
        index = await self.cache.fresh_local()
        if index is None:
            return None
        if kind == "by-document":
            text = raw.strip()
            return index.hit_body("document", text) if DOCUMENT.fullmatch(text) else None
        if kind == "by-phone":
            s = self.settings
            number = normalize_phone(raw, s.PHONE_COUNTRY_CODE, s.PHONE_NATIONAL_LENGTH)
            return index.hit_body("phone", number) if len(number) >= MIN_PHONE_DIGITS else None
        if kind == "by-service-id":
            text = raw.strip()
            valid = text.isdigit() and text.isascii() and len(text) <= MAX_SERVICE_ID_DIGITS
            return index.hit_body("service_id", int(text)) if valid else None
        return None

    async def by_document(self, document: str) -> Found:
        text = document.strip()
        if not DOCUMENT.fullmatch(text):
            raise InvalidInput(action=Action.INVALID_DOCUMENT, variant="format")
        key = document_key(text)

        def accept(client: Client) -> bool:
            return client["document"] is not None and document_key(client["document"]) == key

        # Each form is asked as it is sent (the upstream's filter is exact), so a miss of
        # "pa778899" is never remembered as one of "PA778899".
        return await self._lookup(
            lambda index: index.found_with_others("document", text),
            *(Question("document", value, accept) for value in document_values(text)),
        )

    def normalized_phone(self, phone: str) -> str:
        s = self.settings
        number = normalize_phone(phone, s.PHONE_COUNTRY_CODE, s.PHONE_NATIONAL_LENGTH)
        if len(number) < MIN_PHONE_DIGITS:
            raise InvalidInput(action=Action.INVALID_PHONE, variant="format")
        return number

    async def by_phone(self, phone: str) -> Found:
        number = self.normalized_phone(phone)
        s = self.settings
        return await self._lookup(
            lambda index: index.found_with_others("phone", number),
            Question(
                "phone",
                number,
                lambda c: (
                    number
                    in field_phones(c["phone"], s.PHONE_COUNTRY_CODE, s.PHONE_NATIONAL_LENGTH)
                ),
            ),
        )

    async def by_service_id(self, service_id: int) -> Found:
        text = str(service_id)
        return await self._lookup(
            lambda index: _alone(index.get(service_id)),
            Question("service_id", text, lambda c: c["service_id"] == service_id),
        )

    async def by_service_id_text(self, raw: str) -> Found:
        return await self.by_service_id(parse_service_id(raw))

    async def get_client(self, service_id: int) -> Client | None:
        """For other features (tickets, pings): the client, or None when it does not exist.
        Upstream failures raise (never a false "not found")."""
        try:
            return (await self.by_service_id(service_id)).client
        except NotFound:
            return None

    # -- whole records, for other features (accounts, diagnose) ---------------------

    async def find_record(self, service_id: int) -> tuple[ClientRecord, float | None, bool]:
        """(record, load time of the cached copy it came from or None when it was read from
        the upstream just now, stale). NotFound for an unknown client; upstream failures
        raise (never a false "not found")."""
        snapshot = await self.cache.peek()
        if snapshot is not None:
            record = snapshot.value.record(service_id)
            if record is not None:
                return record, snapshot.loaded_at, snapshot.stale
        found = await self.by_service_id(service_id)
        if found.record is not None:
            return found.record, None, False
        # Another lookup patched it into the index meanwhile.
        snapshot = await self.cache.peek()
        record = None if snapshot is None else snapshot.value.record(service_id)
        if record is None:
            raise client_not_found()
        return record, snapshot.loaded_at if snapshot else None, False

    async def confirmed_record(self, service_id: int) -> tuple[ClientRecord, bool]:
        """The record and its stale flag, with a `suspended`/`cancelled` state confirmed by
        a fresh read of this one client when the cached copy is older than
        STATE_FRESH_SECONDS: someone who paid minutes ago must not hear they are cut off.
        The fresh row patches the cached list; a confirmation is trusted for
        STATE_FRESH_SECONDS (shared by workers), so a suspended customer asking again costs
        no further upstream call. An upstream failure raises: never a guess."""
        record, loaded_at, stale = await self.find_record(service_id)
        if record["client"]["service_state"] not in CONFIRMED_STATES or loaded_at is None:
            return record, stale
        window = self.settings.STATE_FRESH_SECONDS
        if time.time() - loaded_at < window:
            return record, stale
        confirmed_key = f"clients:confirmed:{service_id}"
        if window > 0 and await self.store.get(confirmed_key) is not None:
            return record, stale
        try:
            rows = await self.misses.query("service_id", str(service_id))
        except UpstreamUnauthorized:
            raise unable_to_fetch() from None
        fresh = next((r for r in rows if r["client"]["service_id"] == service_id), None)
        if fresh is None:
            raise client_not_found()
        await self.remember(fresh)
        if window > 0:
            await self.store.set(confirmed_key, True, ttl=window)
        return fresh, False
