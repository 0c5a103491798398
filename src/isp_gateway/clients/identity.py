"""Identity (spec 4.5, CALLERS.md 2): verify a service's holder, resolve one without a
service id, the three identity counters and the attempts left.

Built on the client lookups (clients/lookups.py) and the plans (a record without a price).
Every verify and resolve records its audit event (CALLERS.md 4) where its outcome is
decided: `verified`, `failed` or `locked`; the details hold field names, never values.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from isp_gateway.clients.matching import address_tokens, price_matches, text_matches, tokens
from isp_gateway.clients.misses import MSG_NOT_FOUND_ES, client_not_found, unable_to_fetch
from isp_gateway.clients.schemas import VerifyRequest
from isp_gateway.clients.service import Found
from isp_gateway.kit.actions import Action
from isp_gateway.kit.callers import current_caller
from isp_gateway.kit.errors import (
    Conflict,
    InvalidInput,
    Locked,
    NotFound,
    UpstreamError,
    UpstreamUnauthorized,
)
from isp_gateway.kit.throttle import FailureThrottle
from isp_gateway.upstream.clients import Client

if TYPE_CHECKING:
    from isp_gateway.clients.service import ClientService
    from isp_gateway.kit.recorder import Recorder
    from isp_gateway.kit.storage import Store
    from isp_gateway.kit.verifications import Verifications
    from isp_gateway.plans.service import PlanService
    from isp_gateway.settings import Settings

log = logging.getLogger("isp_gateway.clients")

MIN_VERIFY_FIELDS = 3

MSG_FEW_FIELDS = "Debe proporcionar al menos 3 de los 4 campos para verificar la identidad"
MSG_VERIFIED = "Identidad validada correctamente"
MSG_MISMATCH = "Los datos proporcionados no coinciden con los del cliente"
MSG_LOCKED = "Demasiados intentos de verificación fallidos; intente más tarde"


def _locked(retry_after: int) -> Locked:
    return Locked(MSG_LOCKED, retry_after=retry_after, action=Action.CLIENT_VERIFICATION_LOCKED)


@dataclass(frozen=True)
class Verification:
    is_valid: bool
    matched_fields: list[str]
    debug: dict[str, Any] | None


class IdentityService:
    def __init__(
        self,
        *,
        settings: Settings,
        store: Store,
        audit: Recorder,
        clients: ClientService,
        plans: PlanService,
        verifications: Verifications,
    ) -> None:
        self.settings = settings = settings
        store = store
        self.audit = audit
        self.clients = clients
        self.plans = plans
        self.verifications = verifications
        # CALLERS.md 2, identity attempts: three counters in one window. (service, end
        # user) locks that pair; (end user) locks them on every service, verify and resolve
        # together; (service) locks it for everyone (a distributed guess).
        window = settings.VERIFY_LOCKOUT_SECONDS
        self.verify_throttle = FailureThrottle(
            store, "verify", settings.VERIFY_MAX_FAILURES, window
        )
        self.end_user_throttle = FailureThrottle(
            store, "verify-end-user", settings.VERIFY_END_USER_MAX_FAILURES, window
        )
        self.service_throttle = FailureThrottle(
            store, "verify-service", settings.VERIFY_SERVICE_MAX_FAILURES, window
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
            raise InvalidInput(MSG_FEW_FIELDS, action=Action.CLIENT_VERIFICATION_FAILED)
        return given

    @staticmethod
    def _end_user() -> str:
        caller = current_caller()
        # Outside a request (no caller resolved): one shared name, so nothing goes uncounted.
        return caller.end_user if caller is not None else "-"

    async def _audit(
        self, event: str, outcome: str, service_id: int | None, **details: Any
    ) -> None:
        """One audit event (CALLERS.md 4) where the outcome is decided; details name fields
        and reasons, never what was typed or what the record holds."""
        await self.audit.record(event, outcome, service_id=service_id, details=details)

    async def _reserve(self, counters: list[tuple[FailureThrottle, str]]) -> None:
        """Count the attempt on every counter before it is checked, atomically per counter:
        parallel guesses cannot slip more checks past a lock than it allows while the first
        are in flight. A refused attempt gives back what it took on the counters before."""
        taken: list[tuple[FailureThrottle, str]] = []
        for throttle, key in counters:
            retry_after = await throttle.reserve(key)
            if retry_after is not None:
                await self._release(taken)
                raise _locked(retry_after)
            taken.append((throttle, key))

    @staticmethod
    async def _release(counters: list[tuple[FailureThrottle, str]]) -> None:
        for throttle, key in counters:
            await throttle.release(key)

    def _counters(self, service_id: int, end_user: str) -> list[tuple[FailureThrottle, str]]:
        return [
            (self.verify_throttle, f"{service_id}|{end_user}"),
            (self.end_user_throttle, end_user),
            (self.service_throttle, str(service_id)),
        ]

    async def verify(self, service_id: int, body: VerifyRequest) -> Verification:
        given = self._require_fields(body)
        counters = self._counters(service_id, self._end_user())
        try:
            await self._reserve(counters)
        except Locked:
            await self._audit("verify", "locked", service_id)
            raise
        try:
            try:
                found = await self.clients.by_service_id(service_id)
            except NotFound:
                await self._audit("verify", "failed", service_id, reason=Action.CLIENT_NOT_FOUND)
                raise client_not_found(MSG_NOT_FOUND_ES) from None
            client = found.client
            matched, price = await self._match(
                client, await self._plan_id(service_id), given, debug=True
            )
        except BaseException:
            # No comparison was made (unknown client, upstream down): not a failed guess.
            await self._release(counters)
            raise
        if len(matched) == len(given):
            # A success resets its own pair only; on the wider counters it was no failure.
            pair, *wider = counters
            await pair[0].success(pair[1])
            await self._release(wider)
            await self._audit("verify", "verified", service_id, matched_fields=matched)
            return Verification(True, matched, None)
        # A mismatch: the reserved attempt stays counted as a failure on all three.
        await self._audit("verify", "failed", service_id, reason="mismatch", matched_fields=matched)
        debug = {
            "client_address": client["address"],
            "client_plan_name": client["internet_plan_name"],
            "resolved_plan_price": price,
        }
        return Verification(False, matched, debug)

    async def rest_verification_id(self, service_id: int) -> str | None:
        """After a successful REST verify, with REQUIRE_VERIFICATION: a verification_id bound
        to the service, the caller and the end user (CALLERS.md 5), for X-Verification-Id.
        None without the setting (the answer stays as it was) or outside a request."""
        caller = current_caller()
        if not self.settings.REQUIRE_VERIFICATION or caller is None:
            return None
        return (await self.verifications.issue(service_id, caller)).verification_id

    async def _locked_for(self, service_id: int, end_user: str) -> int | None:
        """Seconds until `service_id` may be verified by `end_user`, or None when it may."""
        for throttle, key in (
            (self.verify_throttle, f"{service_id}|{end_user}"),
            (self.service_throttle, str(service_id)),
        ):
            wait = await throttle.retry_after(key)
            if wait is not None:
                return wait
        return None

    async def verify_attempts_left(self, service_id: int) -> int:
        """Attempts this end user has left on the service before a lock (the fewest left on
        any of the counters a failure would add to), for an answer that says so."""
        counters = self._counters(service_id, self._end_user())
        return min([await throttle.remaining(key) for throttle, key in counters])

    async def resolve(self, body: VerifyRequest) -> Found:
        given = self._require_fields(body)
        by_name = "name" in given
        words_of = given["name"] if by_name else given.get("address")
        end_user = self._end_user()
        # Counted once on the end user's counter, whatever the words (their order, repeats,
        # omissions): a guesser gains nothing by rewording, nor by alternating with verify.
        attempt = [(self.end_user_throttle, end_user)]
        try:
            await self._reserve(attempt)
        except Locked:
            await self._audit("resolve", "locked", None)
            raise
        try:
            index, stale = await self.clients.warm()
            words = tokens(words_of) if by_name else address_tokens(words_of)
            candidates = index.candidates(words, address=not by_name)
            verified: list[Client] = []
            for client in candidates:
                plan_id = index.plan_id(client["service_id"])
                matched, _ = await self._match(client, plan_id, given, debug=False)
                if len(matched) == len(given):
                    verified.append(client)
            wait = None
            if len(verified) == 1:
                # A service whose verification is locked for this end user (or for everyone)
                # is not verified by the back door either.
                wait = await self._locked_for(verified[0]["service_id"], end_user)
        except BaseException:
            await self._release(attempt)
            raise
        if wait is not None:
            await self._audit("resolve", "locked", verified[0]["service_id"])
            raise _locked(wait)
        # Both 404 outcomes stay counted as failures (the reservation is kept).
        if not candidates:
            await self._audit("resolve", "failed", None, reason=Action.CLIENT_NOT_FOUND)
            raise client_not_found(MSG_NOT_FOUND_ES)
        if not verified:
            await self._audit("resolve", "failed", None, reason="mismatch")
            if len(candidates) == 1:
                # The words named one customer: a guess at them, on the backstop counter of
                # that service too, so that rotating X-End-User-Id buys nothing. (Words
                # naming several customers lock none of them for everyone.)
                await self.service_throttle.failure(str(candidates[0]["service_id"]))
            raise NotFound(MSG_MISMATCH, action=Action.CLIENT_VERIFICATION_FAILED)
        if len(verified) > 1:
            # Never guess between two customers; neither a failure nor a success.
            await self._release(attempt)
            await self._audit("resolve", "failed", None, reason="ambiguous")
            raise Conflict(
                "Varios clientes coinciden con los datos; se necesita un dato adicional",
                action=Action.CLIENT_AMBIGUOUS,
            )
        await self._release(attempt)
        service_id = verified[0]["service_id"]
        await self.verify_throttle.success(f"{service_id}|{end_user}")
        await self._audit("resolve", "verified", service_id, matched_fields=sorted(given))
        return Found(verified[0], stale)
