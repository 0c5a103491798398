"""Identity (spec 4.4-4.5, CALLERS.md 2 and 6): verify a service's holder, resolve one
without a service id, under the identity policy (policy.py), on the identity counters
(attempts.py) and the caller's quota of distinct resolves an hour.

Built on the client lookups (clients/lookups.py) and the plans (a record without a price).
Every verify and resolve has its audit event (CALLERS.md 4) where its outcome is decided:
`verified`, `failed` or `locked`; the details hold field names, never values. Kept one by
one: the failures that count against someone (a mismatch, a resolve that names no one),
each bounded by the identity counters, and a caller's first success about a service in a
minute. Counted (CALLERS.md 6), as nothing bounds them: a refusal, a verify of a service
that does not exist, an ambiguous resolve, the same success again within its minute.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from isp_gateway.clients.attempts import Counter, IdentityCounters, Reservation, locked
from isp_gateway.clients.matching import (
    address_tokens,
    fact_known,
    price_matches,
    text_matches,
    tokens,
)
from isp_gateway.clients.misses import VERIFY, client_not_found, unable_to_fetch
from isp_gateway.clients.policy import require_facts
from isp_gateway.clients.schemas import VerifyRequest
from isp_gateway.clients.service import Found
from isp_gateway.kit.actions import Action
from isp_gateway.kit.callers import current_caller
from isp_gateway.kit.errors import (
    Conflict,
    Locked,
    NotFound,
    UpstreamError,
    UpstreamUnauthorized,
)
from isp_gateway.kit.quota import DistinctQuota
from isp_gateway.upstream.clients import Client

if TYPE_CHECKING:
    from isp_gateway.clients.service import ClientService
    from isp_gateway.kit.verifications import Verifications
    from isp_gateway.parts import Parts
    from isp_gateway.plans.service import PlanService

log = logging.getLogger("isp_gateway.clients")

# The catalogue's variants of verify's answers (kit/messages; Spanish as the spec says).
VERIFIED_VARIANT = "verify"
MISMATCH_VARIANT = "mismatch"
RESOLVE_WINDOW_SECONDS = 3600


@dataclass(frozen=True, slots=True)
class Verification:
    is_valid: bool
    matched_fields: list[str]
    # Spec policy, on a mismatch: the record's address, plan and price (spec 2.5).
    debug: dict[str, Any] | None
    # Strict policy, on a mismatch: what is left before a lock (CALLERS.md 6).
    attempts_left: int | None = None


class IdentityService:
    def __init__(
        self,
        parts: Parts,
        *,
        clients: ClientService,
        plans: PlanService,
        verifications: Verifications,
    ) -> None:
        settings, store, audit = parts.settings, parts.store, parts.audit
        self.settings, self.audit = settings, audit
        self.clients, self.plans, self.verifications = clients, plans, verifications
        # CALLERS.md 6: the policy REST answers under (MCP is always strict).
        self.strict = settings.IDENTITY_POLICY == "strict"
        self.counters = IdentityCounters(store, settings, audit)
        # CALLERS.md 6: the distinct services one caller may resolve in any hour.
        self.resolves = DistinctQuota(
            store, "resolves", settings.CALLER_RESOLVES_PER_HOUR, RESOLVE_WINDOW_SECONDS
        )

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
        snapshot = await self.clients.cache.peek()
        return snapshot.value.plan_id(service_id) if snapshot is not None else None

    async def _price(self, client: Client, plan_id: int | None) -> float | None:
        if client["internet_plan_price"] is not None:
            return client["internet_plan_price"]
        # The record has no price (the upstream leaves precio_plan empty or "0.00"): ask the
        # plans source, which keeps its own cache.
        return await self.plans.price_for(plan_id, client["internet_plan_name"])

    async def _match(
        self,
        client: Client,
        plan_id: int | None,
        given: dict[str, Any],
        *,
        debug: bool,
        strict: bool,
    ) -> tuple[list[str], float | None]:
        """The provided fields that match, and the price compared (for the debug block).
        Under `strict`, the name and the address must also say who and where (fact_known).

        With `debug` false (resolve, or no debug block to fill), the price is not looked up
        for a record whose other fields already failed."""
        known = fact_known if strict else text_matches
        matched = []
        if "name" in given and known(given["name"], client["name"]):
            matched.append("name")
        if "address" in given and known(given["address"], client["address"], address=True):
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

    def _require_fields(self, body: VerifyRequest, strict: bool) -> dict[str, Any]:
        given = self._provided(body)
        require_facts(given, strict=strict)
        return given

    @staticmethod
    def _who() -> tuple[str, str]:
        """(caller, end user) of the request. Outside a request (no caller resolved): one
        shared name, so nothing goes uncounted."""
        caller = current_caller()
        return (caller.caller, caller.end_user) if caller is not None else ("-", "-")

    async def _audit(
        self, event: str, outcome: str, service_id: int | None, **details: Any
    ) -> None:
        """One audit event (CALLERS.md 4) where the outcome is decided; details name fields
        and reasons, never what was typed or what the record holds."""
        await self.audit.record(event, outcome, service_id=service_id, details=details)

    def _refused(self, event: str, outcome: str, service_id: int | None) -> None:
        """A call refused before any check (a lock, the resolve quota): counted, like every
        refusal (CALLERS.md 6), so a locked caller's loop cannot flush the identity events."""
        self.audit.count(event, outcome, service_id=service_id)

    async def _reserve(
        self, counters: list[Counter], event: str, service_id: int | None
    ) -> Reservation:
        """The attempt counted on `counters` before it is checked; a locked one is refused
        (429, counted in the audit)."""
        try:
            return await self.counters.reserve(counters)
        except Locked:
            self._refused(event, "locked", service_id)
            raise

    async def verify(
        self, service_id: int, body: VerifyRequest, *, strict: bool | None = None
    ) -> Verification:
        """Verify the holder of `service_id`; `strict` overrides the configured policy (MCP
        is always strict). A mismatch carries the `debug` block under `spec` only, and the
        attempts left under `strict`."""
        strict = self.strict if strict is None else strict
        given = self._require_fields(body, strict)
        caller, end_user = self._who()
        counters = self.counters.of_verify(service_id, caller, end_user)
        reservation = await self._reserve(counters, "verify", service_id)
        try:
            try:
                found = await self.clients.by_service_id(service_id)
            except NotFound:
                # No comparison was made and nothing is counted against anyone, so a caller
                # may send this for free: counted, not kept one by one, and with no service
                # (there is none), so that a loop over made-up ids cannot push the verifies
                # that happened out of the identity stream (CALLERS.md 6).
                self.audit.count_about(
                    "verify", "failed", None, {"reason": Action.CLIENT_NOT_FOUND}
                )
                raise client_not_found(VERIFY) from None
            client = found.client
            matched, price = await self._match(
                client, await self._plan_id(service_id), given, debug=not strict, strict=strict
            )
        except BaseException:
            # No comparison was made (unknown client, upstream down): not a failed guess.
            await self.counters.release(reservation.counters)
            raise
        if len(matched) == len(given):
            # A success resets its own pair only; on the wider counters it was no failure.
            caller_unit, pair, *wider = reservation.counters
            await pair[0].success(pair[1])
            await self.counters.release([caller_unit, *wider])
            # A success costs the caller nothing and may be repeated at will: kept once a
            # minute per caller and service, counted after.
            await self.audit.record_once_a_minute(
                "verify", "verified", service_id, {"matched_fields": matched}
            )
            return Verification(True, matched, None)
        # A mismatch: the reserved attempt stays counted as a failure on every counter.
        await self._audit("verify", "failed", service_id, reason="mismatch", matched_fields=matched)
        await self.counters.failed(reservation, "verify")
        if strict:
            # CALLERS.md 6: no value of the record, only the names that matched and what is
            # left before the lock.
            left = await self.counters.attempts_left(counters)
            return Verification(False, matched, None, attempts_left=left)
        debug = {
            "client_address": client["address"],
            "client_plan_name": client["internet_plan_name"],
            "resolved_plan_price": price,
        }
        return Verification(False, matched, debug)

    async def rest_verification_id(self, service_id: int) -> str | None:
        """After a successful REST verify or strict resolve: a verification_id bound to the
        service, the caller and the end user (CALLERS.md 5), for X-Verification-Id and the
        routes that need one; whatever the policy (CALLERS.md 5, round 4). None outside a
        request."""
        caller = current_caller()
        if caller is None:
            return None
        return (await self.verifications.issue(service_id, caller)).verification_id

    async def verify_attempts_left(self, service_id: int) -> int:
        """Attempts this end user has left on the service before a lock (the fewest left on
        any of the counters a failure would add to), for an answer that says so."""
        caller, end_user = self._who()
        return await self.counters.attempts_left(
            self.counters.of_verify(service_id, caller, end_user)
        )

    async def resolve(self, body: VerifyRequest) -> Found:
        """The one client the facts name (spec 4.5). Under `strict` the facts must include
        the name and the address (the router then answers ids and a verification_id only).
        Every resolve counts on the caller's quota of distinct services an hour."""
        given = self._require_fields(body, self.strict)
        by_name = "name" in given
        words_of = given["name"] if by_name else given.get("address")
        caller, end_user = self._who()
        # Counted once on the end user's counter (and the caller's), whatever the words
        # (their order, repeats, omissions): a guesser gains nothing by rewording, nor by
        # alternating with verify, nor by renaming the end user.
        attempt = self.counters.of_resolve(caller, end_user)
        reservation = await self._reserve(attempt, "resolve", None)
        try:
            index, stale = await self.clients.warm()
            words = tokens(words_of) if by_name else address_tokens(words_of)
            candidates = index.candidates(words, address=not by_name)
            verified: list[Client] = []
            for client in candidates:
                plan_id = index.plan_id(client["service_id"])
                matched, _ = await self._match(
                    client, plan_id, given, debug=False, strict=self.strict
                )
                if len(matched) == len(given):
                    verified.append(client)
            wait = None
            if len(verified) == 1:
                # A service whose verification is locked for this end user (or for everyone)
                # is not verified by the back door either.
                wait = await self.counters.locked_for(verified[0]["service_id"], caller, end_user)
        except BaseException:
            await self.counters.release(reservation.counters)
            raise
        if wait is not None:
            # Kept counted as a failure (a guess at a locked service), like the 404s below.
            self._refused("resolve", "locked", verified[0]["service_id"])
            await self.counters.failed(reservation, "resolve")
            raise locked(wait)
        # Both 404 outcomes stay counted as failures (the reservation is kept).
        if not candidates:
            await self._audit("resolve", "failed", None, reason=Action.CLIENT_NOT_FOUND)
            await self.counters.failed(reservation, "resolve")
            raise client_not_found(VERIFY)
        if not verified:
            await self._audit("resolve", "failed", None, reason="mismatch")
            await self.counters.failed(reservation, "resolve")
            if len(candidates) == 1:
                # The words named one customer: a guess at them, on the backstop counter of
                # that service too, so that rotating X-End-User-Id buys nothing. (Words
                # naming several customers lock none of them for everyone.)
                await self.counters.service.failure(str(candidates[0]["service_id"]))
            raise NotFound(action=Action.CLIENT_VERIFICATION_FAILED, variant=MISMATCH_VARIANT)
        if len(verified) > 1:
            # Never guess between two customers; neither a failure nor a success, so it costs
            # the caller nothing: counted, not kept one by one (CALLERS.md 6).
            await self.counters.release(reservation.counters)
            self.audit.count_about("resolve", "failed", None, {"reason": "ambiguous"})
            raise Conflict(action=Action.CLIENT_AMBIGUOUS)
        await self.counters.release(reservation.counters)
        service_id = verified[0]["service_id"]
        retry_after = await self.resolves.take(caller, service_id)
        if retry_after is not None:
            # A harvest by name gets a handful, not the customer base (CALLERS.md 6).
            self._refused("resolve", Action.IDENTITY_RATE_LIMITED, service_id)
            raise Locked(
                retry_after=retry_after, action=Action.IDENTITY_RATE_LIMITED, variant="resolves"
            )
        await self.counters.succeeded(service_id, caller, end_user)
        # Like a verify passed again: the caller's quota counts distinct services only.
        await self.audit.record_once_a_minute(
            "resolve", "verified", service_id, {"matched_fields": sorted(given)}
        )
        return Found(verified[0], stale)
