"""Clients (spec 4.3-4.6): list, search, lookups, verify, resolve and update.

Everything is served from one cached client list (refresh-ahead, single flight,
stale-if-error; see cache.py) and its in-process index. A lookup miss asks the upstream
directly, because a customer added since the last load must still be found, and a confirmed
miss is remembered for NEGATIVE_CACHE_SECONDS.
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

from isp_gateway.cache import CachedResource
from isp_gateway.clients.index import ClientIndex, document_key, pack_lines, pack_records
from isp_gateway.clients.matching import (
    address_tokens,
    price_matches,
    search_key,
    text_matches,
    tokens,
)
from isp_gateway.clients.phones import MIN_PHONE_DIGITS, field_phones, normalize_phone
from isp_gateway.clients.schemas import VerifyRequest
from isp_gateway.errors import (
    Conflict,
    InvalidInput,
    Locked,
    NotFound,
    ServiceError,
    UpstreamError,
    UpstreamRateLimited,
    UpstreamUnauthorized,
)
from isp_gateway.memory import release_free_memory
from isp_gateway.throttle import FailureThrottle
from isp_gateway.upstream import clients as upstream
from isp_gateway.upstream.clients import Client, ClientRecord

if TYPE_CHECKING:
    from isp_gateway.runtime import Runtime

log = logging.getLogger("isp_gateway.clients")

_DOCUMENT = re.compile(r"[A-Za-z0-9]{3,20}")
MIN_VERIFY_FIELDS = 3
MAX_SEARCH_LIMIT = 200
MAX_SERVICE_ID_DIGITS = 18

MSG_NOT_FOUND = "Client not found"
MSG_NOT_FOUND_ES = "Cliente no encontrado"
MSG_FEW_FIELDS = "Debe proporcionar al menos 3 de los 4 campos para verificar la identidad"
MSG_VERIFIED = "Identidad validada correctamente"
MSG_MISMATCH = "Los datos proporcionados no coinciden con los del cliente"
MSG_LOCKED = "Demasiados intentos de verificación fallidos; intente más tarde"


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


def parse_service_id(raw: str) -> int:
    """A service id from a path: ASCII digits only (no sign, no decimals), at most 18 of
    them (the documented pattern: no upstream id is longer, and Python refuses to parse a
    number of thousands of digits); else 400."""
    text = raw.strip()
    if not text.isdigit() or not text.isascii() or len(text) > MAX_SERVICE_ID_DIGITS:
        raise InvalidInput("Invalid service id", action="invalid_service_id")
    return int(text)


def client_not_found(message: str = MSG_NOT_FOUND) -> NotFound:
    return NotFound(message, action="client_not_found")


def unable_to_fetch() -> ServiceError:
    # Spec 5.2: our key was rejected; say nothing more (the details are in the log).
    return ServiceError("Unable to fetch client data", action="CLIENT_NOT_FOUND", status_code=502)


@dataclass(frozen=True)
class Found:
    client: Client
    stale: bool = False
    # Set when the client was read from the upstream just now (a miss of the cached list).
    record: ClientRecord | None = None


# States a customer must not be told from an old copy (BEYOND.md "Service state").
CONFIRMED_STATES = frozenset({"suspended", "cancelled"})


@dataclass(frozen=True)
class Verification:
    is_valid: bool
    matched_fields: list[str]
    debug: dict[str, Any] | None


class ClientService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        settings = runtime.settings
        self.settings = settings
        self.cache: CachedResource[ClientIndex] = CachedResource(
            runtime.store,
            "clients",
            self._load,
            self._index,
            ttl=settings.CLIENT_CACHE_SECONDS,
            stale_ttl=settings.STALE_IF_ERROR_SECONDS,
            patch=self._patch,
            metrics=runtime.metrics,
            planner=runtime.planner,
        )
        self.verify_throttle = FailureThrottle(
            runtime.store, "verify", settings.VERIFY_MAX_FAILURES, settings.VERIFY_LOCKOUT_SECONDS
        )
        self.resolve_throttle = FailureThrottle(
            runtime.store, "resolve", settings.VERIFY_MAX_FAILURES, settings.VERIFY_LOCKOUT_SECONDS
        )
        self._job: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # Upstream queries of lookup misses in flight, by (kind, value): a bot retrying an
        # unknown document, or many asking at once, costs one upstream call, not N.
        self._queries: dict[tuple[str, str], asyncio.Future[list[ClientRecord]]] = {}

    async def start(self) -> None:
        """Warm the cache and keep it fresh in the background (start-up does not wait)."""
        self._job = asyncio.create_task(self.cache.run_periodic())

    async def aclose(self) -> None:
        pending: list[asyncio.Future[Any]] = [
            t for t in (self._job, *self._tasks, *self._queries.values()) if t is not None
        ]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await self.cache.aclose()

    # -- the cache -------------------------------------------------------------------

    async def _load(self, background: bool) -> dict[str, Any]:
        # Each page is mapped and packed as it arrives, so a load never holds the raw rows
        # of the whole list (hundreds of megabytes at 200,000 clients).
        chunks = await upstream.fetch_all_clients_as(
            self.runtime.gateway, _pack_page, background=background
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

    async def _warm(self) -> tuple[ClientIndex, bool]:
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

    async def _remember(self, record: ClientRecord) -> None:
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
            raise ServiceError("Failed to retrieve clients") from None
        return snapshot.value.active_json(), snapshot.stale

    async def search(self, q: str | None, limit: int) -> tuple[bytes, int, bool]:
        """The matching clients as a pre-serialised JSON array, how many, and the stale flag."""
        query = (q or "").strip()
        if not query:
            raise InvalidInput("Query parameter 'q' is required")
        index, stale = await self._warm()
        payload, count = index.search_json(query, max(1, min(limit, MAX_SEARCH_LIMIT)))
        return payload, count, stale

    # -- lookups ---------------------------------------------------------------------

    async def _lookup(
        self,
        kind: str,
        key: str,
        from_index: Callable[[ClientIndex], Client | None],
        accept: Callable[[Client], bool],
        upstream_value: str,
    ) -> Found:
        snapshot = await self.cache.peek()
        if snapshot is not None:
            hit = from_index(snapshot.value)
            if hit is not None:
                return Found(hit, snapshot.stale)
        miss_key = f"clients:miss:{kind}:{key}"
        if await self.runtime.store.get(miss_key) is not None:
            raise client_not_found()
        try:
            records = await self._query(kind, upstream_value)
        except UpstreamUnauthorized:
            raise unable_to_fetch() from None
        matches = [r for r in records if accept(r["client"])]
        if not matches:
            if self.settings.NEGATIVE_CACHE_SECONDS > 0:
                await self.runtime.store.set(
                    miss_key, True, ttl=self.settings.NEGATIVE_CACHE_SECONDS
                )
            raise client_not_found()
        # The index's choice among clients sharing a key: an active one, then the lowest id.
        active = self.settings.ACTIVE_CLIENT_STATES
        record = min(
            matches,
            key=lambda r: (r["client"]["payment_status"] not in active, r["client"]["service_id"]),
        )
        if snapshot is not None:
            # A client the cached list did not know yet: keep it for the next lookups, in
            # the background (the cache lock may be held by a reload).
            task = asyncio.create_task(self._remember(record))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return Found(record["client"], record=record)

    async def _query(self, kind: str, value: str) -> list[ClientRecord]:
        """One upstream query per (kind, value) however many lookups wait for it."""
        key = (kind, value)
        future = self._queries.get(key)
        if future is None:
            future = asyncio.ensure_future(
                upstream.query_clients(self.runtime.gateway, kind, value)
            )
            self._queries[key] = future

            def done(task: asyncio.Future[list[ClientRecord]]) -> None:
                if self._queries.get(key) is task:
                    del self._queries[key]
                if not task.cancelled():
                    task.exception()  # retrieved here: every waiter may have gone away

            future.add_done_callback(done)
        # shield: a caller that disconnects must not cancel the query others wait for.
        return await asyncio.shield(future)

    async def fresh_hit_body(self, kind: str, raw: str) -> bytes | None:
        """The rendered `client_found` answer when a lookup hits the fresh, warm index;
        None for anything else (bad input, a miss, a cold or ageing cache), which the
        regular route then handles with every rule. Used by the lookup fast path."""
        index = await self.cache.fresh_local()
        if index is None:
            return None
        if kind == "by-document":
            text = raw.strip()
            return index.hit_body("document", text) if _DOCUMENT.fullmatch(text) else None
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
        if not _DOCUMENT.fullmatch(text):
            raise InvalidInput("Invalid document format", action="invalid_document")
        key = document_key(text)
        return await self._lookup(
            "document",
            key,
            lambda index: index.by_doc(text),
            lambda c: c["document"] is not None and document_key(c["document"]) == key,
            text,
        )

    def _normalize_phone(self, phone: str) -> str:
        s = self.settings
        number = normalize_phone(phone, s.PHONE_COUNTRY_CODE, s.PHONE_NATIONAL_LENGTH)
        if len(number) < MIN_PHONE_DIGITS:
            raise InvalidInput("Invalid phone format", action="invalid_phone")
        return number

    async def by_phone(self, phone: str) -> Found:
        number = self._normalize_phone(phone)
        s = self.settings
        return await self._lookup(
            "phone",
            number,
            lambda index: index.by_phone_number(number),
            lambda c: (
                number in field_phones(c["phone"], s.PHONE_COUNTRY_CODE, s.PHONE_NATIONAL_LENGTH)
            ),
            number,
        )

    async def by_service_id(self, service_id: int) -> Found:
        return await self._lookup(
            "service_id",
            str(service_id),
            lambda index: index.get(service_id),
            lambda c: c["service_id"] == service_id,
            str(service_id),
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
        if window > 0 and await self.runtime.store.get(confirmed_key) is not None:
            return record, stale
        try:
            rows = await self._query("service_id", str(service_id))
        except UpstreamUnauthorized:
            raise unable_to_fetch() from None
        fresh = next((r for r in rows if r["client"]["service_id"] == service_id), None)
        if fresh is None:
            raise client_not_found()
        await self._remember(fresh)
        if window > 0:
            await self.runtime.store.set(confirmed_key, True, ttl=window)
        return fresh, False

    # -- verify and resolve ----------------------------------------------------------

    @staticmethod
    def _provided(body: VerifyRequest) -> dict[str, Any]:
        values = {
            "name": body.name,
            "address": body.address,
            "internet_plan_name": body.internet_plan_name,
            "internet_plan_price": body.internet_plan_price,
        }
        return {
            k: v.strip() if isinstance(v, str) else v
            for k, v in values.items()
            if v is not None and not (isinstance(v, str) and not v.strip())
        }

    async def _plan_id(self, service_id: int) -> int | None:
        snapshot = await self.cache.peek()
        return snapshot.value.plan_id(service_id) if snapshot is not None else None

    async def _price(self, client: Client, plan_id: int | None) -> float | None:
        if client["internet_plan_price"] is not None:
            return client["internet_plan_price"]
        # The record has no price (the upstream leaves precio_plan empty or "0.00"): ask the
        # plans source, which keeps its own cache.
        return await self.runtime.plans.price_for(plan_id, client["internet_plan_name"])

    async def _match(
        self, client: Client, plan_id: int | None, given: dict[str, Any], *, debug: bool
    ) -> tuple[list[str], float | None]:
        """The provided fields that match, and the price compared (for the debug block).

        With `debug` false (resolve), the price is not looked up for a record whose other
        fields already failed."""
        matched = []
        if "name" in given and text_matches(given["name"], client["name"]):
            matched.append("name")
        if "address" in given and text_matches(given["address"], client["address"], address=True):
            matched.append("address")
        if "internet_plan_name" in given and text_matches(
            given["internet_plan_name"], client["internet_plan_name"]
        ):
            matched.append("internet_plan_name")
        price = client["internet_plan_price"]
        if "internet_plan_price" in given:
            decides = len(matched) == len(given) - 1
            if not decides and not debug:
                return matched, price
            try:
                price = await self._price(client, plan_id)
            except UpstreamError as exc:
                # When the price decides, an upstream failure must not pass for "your data
                # do not match" (nor count against the customer's attempts): 502.
                if decides and isinstance(exc, UpstreamUnauthorized):
                    raise unable_to_fetch() from None
                if decides:
                    raise
                log.warning("plan price for service %d unavailable", client["service_id"])
                price = None
            if price_matches(given["internet_plan_price"], price):
                matched.append("internet_plan_price")
        return matched, price

    def _require_fields(self, body: VerifyRequest) -> dict[str, Any]:
        given = self._provided(body)
        if len(given) < MIN_VERIFY_FIELDS:
            raise InvalidInput(MSG_FEW_FIELDS, action="client_verification_failed")
        return given

    @staticmethod
    async def _reserve(throttle: FailureThrottle, key: str) -> None:
        # The attempt is counted before it is checked, atomically: parallel guesses cannot
        # slip more checks past the lock than it allows while the first are in flight.
        retry_after = await throttle.reserve(key)
        if retry_after is not None:
            raise Locked(MSG_LOCKED, retry_after=retry_after, action="client_verification_locked")

    async def verify(self, service_id: int, body: VerifyRequest) -> Verification:
        given = self._require_fields(body)
        key = str(service_id)
        await self._reserve(self.verify_throttle, key)
        try:
            try:
                found = await self.by_service_id(service_id)
            except NotFound:
                raise client_not_found(MSG_NOT_FOUND_ES) from None
            client = found.client
            matched, price = await self._match(
                client, await self._plan_id(service_id), given, debug=True
            )
        except BaseException:
            # No comparison was made (unknown client, upstream down): not a failed guess.
            await self.verify_throttle.release(key)
            raise
        if len(matched) == len(given):
            await self.verify_throttle.success(key)
            return Verification(True, matched, None)
        # A mismatch: the reserved attempt stays counted as a failure.
        debug = {
            "client_address": client["address"],
            "client_plan_name": client["internet_plan_name"],
            "resolved_plan_price": price,
        }
        return Verification(False, matched, debug)

    async def resolve(self, body: VerifyRequest) -> Found:
        given = self._require_fields(body)
        by_name = "name" in given
        words_of = given["name"] if by_name else given.get("address")
        key = search_key(words_of, address=not by_name) or "-"
        await self._reserve(self.resolve_throttle, key)
        try:
            index, stale = await self._warm()
            words = tokens(words_of) if by_name else address_tokens(words_of)
            candidates = index.candidates(words, address=not by_name)
            verified: list[Client] = []
            for client in candidates:
                plan_id = index.plan_id(client["service_id"])
                matched, _ = await self._match(client, plan_id, given, debug=False)
                if len(matched) == len(given):
                    verified.append(client)
        except BaseException:
            await self.resolve_throttle.release(key)
            raise
        # Both 404 outcomes stay counted as failures (the reservation is kept).
        if not candidates:
            raise client_not_found(MSG_NOT_FOUND_ES)
        if not verified:
            raise NotFound(MSG_MISMATCH, action="client_verification_failed")
        if len(verified) > 1:
            # Never guess between two customers; neither a failure nor a success.
            await self.resolve_throttle.release(key)
            raise Conflict(
                "Varios clientes coinciden con los datos; se necesita un dato adicional",
                action="client_ambiguous",
            )
        await self.resolve_throttle.success(key)
        return Found(verified[0], stale)
        return Found(verified[0], stale)

    # -- update ----------------------------------------------------------------------

    async def update(self, service_id: int, document: str | None, phone: str | None) -> None:
        new_document = document.strip() if document and document.strip() else None
        new_phone = phone.strip() if phone and phone.strip() else None
        if new_document is None and new_phone is None:
            raise InvalidInput(
                "Provide at least one of 'document' or 'phone'", action="client_update_failed"
            )
        if new_document is not None and not _DOCUMENT.fullmatch(new_document):
            raise InvalidInput("Invalid document format", action="invalid_document")
        if new_phone is not None:
            new_phone = self._normalize_phone(new_phone)
        try:
            await upstream.update_profile(self.runtime.gateway, service_id, new_document, new_phone)
        except upstream.ProfileNotFound:
            raise client_not_found() from None
        except UpstreamUnauthorized:
            raise unable_to_fetch() from None
        except UpstreamRateLimited:
            raise
        except UpstreamError:
            raise ServiceError(
                "The client could not be updated upstream", action="client_update_failed"
            ) from None
        await self._after_update(service_id, new_document, new_phone)

    async def _after_update(self, service_id: int, document: str | None, phone: str | None) -> None:
        store = self.runtime.store
        # A miss remembered for the new values would hide the client for a minute.
        if document is not None:
            await store.delete(f"clients:miss:document:{document_key(document)}")
        if phone is not None:
            await store.delete(f"clients:miss:phone:{phone}")
        snapshot = await self.cache.peek()
        if snapshot is None:
            return
        index = snapshot.value
        record = index.record(service_id)
        if record is None:
            return
        # A copy: the index must not see the new values before the patch log has them.
        client: Client = {**record["client"]}
        if document is not None:
            client["document"] = document
        if phone is not None:
            client["phone"] = phone
        await self._remember({**record, "client": client})
