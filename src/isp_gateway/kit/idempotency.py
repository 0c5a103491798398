"""Idempotency for any write (DECISIONS.md: a repeat with the same key returns the first answer).

A write endpoint that takes an `Idempotency-Key` runs its work through `Idempotency.run`:

    answer = await idempotency.run(key, fingerprint, produce, final=(ZoneLimitReached,))
    return render(answer)

- A key is the caller's own (CALLERS.md 1: the credential, an API key's name or `jwt:<sub>`,
  read from the request's `Caller`): another caller's same key is another record, so a key
  never replays one caller's answer to another, nor lets one squat a key another will use.
- The key is bound to the fingerprint of the request (a hash of its canonical body) from its
  first use, whatever the outcome: the same key with another body is a 422
  `idempotency_key_reused`.
- One request per key at a time (a lock in the store, so it holds across workers); a repeat
  that finds the key busy past `wait_seconds` is a 409 `idempotency_key_in_progress` with
  `Retry-After`, safe to repeat.
- Final answers are kept for `ttl` seconds and replayed as they were, with
  `Idempotent-Replayed: true`: whatever `produce` returns, and the refusals named in `final`
  (rendered in the envelope, as the error handler renders them). Any other error is not final:
  it propagates and a repeat with the key tries again.

What is kept is the rendered answer (status and envelope), not a typed outcome: a replay must
be the first answer byte for byte, and the record keeps the shape the service has always
stored (`{"fingerprint", "status", "body"}`), so records written before an upgrade replay after
it. (Not those written before keys were the caller's: they are under another store key. A
repeat across that one upgrade is done again and meets its write's own guard, the promise
ledger, the report's duplicate guard or the ticket's, rather than replay an answer that may be
another caller's.) Without a key, `run` just produces the answer.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any, TypeVar

from isp_gateway.kit.actions import Action
from isp_gateway.kit.answers import Answer
from isp_gateway.kit.callers import current_caller
from isp_gateway.kit.errors import ServiceError
from isp_gateway.kit.storage import LockTimeout, Store

REPLAYED = "Idempotent-Replayed"

T = TypeVar("T")


def fingerprint(value: Any) -> str:
    """A request's fingerprint: the hash of its canonical JSON (sorted keys)."""
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class KeyReused(ServiceError):
    status_code = 422
    action = Action.IDEMPOTENCY_KEY_REUSED
    variant = "rest"


class KeyInProgress(ServiceError):
    status_code = 409
    action = Action.IDEMPOTENCY_KEY_IN_PROGRESS
    variant = "rest"

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message, headers={"Retry-After": "2"})


@dataclass(eq=False)
class Idempotency:
    """The idempotency of one kind of write (`scope` names its records in the store)."""

    store: Store
    scope: str
    _: KW_ONLY
    ttl: float
    # The lock outlives the work under it; a repeat waits this long before the 409.
    lock_seconds: float
    wait_seconds: float

    def record_key(self, key: str, caller: str) -> str:
        """The store's key of `caller`'s `key` (both hashed together, unambiguously: a
        caller's name may hold any character the key may)."""
        digest = hashlib.sha256(json.dumps([caller, key]).encode()).hexdigest()
        return f"idempotency:{self.scope}:{digest}"

    async def run(
        self,
        key: str | None,
        request_fingerprint: str,
        produce: Callable[[], Awaitable[Answer]],
        *,
        final: tuple[type[ServiceError], ...] = (),
    ) -> Answer:
        if not key:
            try:
                return await produce()
            except final as refusal:
                return Answer.of_error(refusal)
        # Outside a request (no caller) every use shares one namespace, as before callers.
        who = current_caller()
        record_key = self.record_key(key, who.caller if who is not None else "")
        try:
            async with self.store.lock(
                record_key, timeout=self.lock_seconds, blocking_timeout=self.wait_seconds
            ):
                record = await self.store.get(record_key)
                if record is not None and record["fingerprint"] != request_fingerprint:
                    raise KeyReused()
                if record is not None and record.get("status") is not None:
                    return Answer(record["status"], record["body"], {REPLAYED: "true"})
                if record is None:
                    # The key is bound to this body from its first use, whatever the outcome.
                    await self.store.set(
                        record_key, {"fingerprint": request_fingerprint}, ttl=self.ttl
                    )
                try:
                    answer = await produce()
                except final as refusal:
                    answer = Answer.of_error(refusal)
                await self.store.set(
                    record_key,
                    {
                        "fingerprint": request_fingerprint,
                        "status": answer.status_code,
                        "body": answer.body,
                    },
                    ttl=self.ttl,
                )
                return answer
        except LockTimeout:
            raise KeyInProgress() from None


async def refusal_told(step: Awaitable[T], refused: Callable[[ServiceError], Awaitable[None]]) -> T:
    """What a write's step gives; a refusal it raises, final or not, is told to `refused`
    first (the service's audit of that outcome), then raised."""
    try:
        return await step
    except ServiceError as refusal:
        await refused(refusal)
        raise
