"""Verification ids (CALLERS.md 5): proof that a caller verified one service's customer.

A successful identity verification issues an opaque `verification_id`, kept in the store
for VERIFICATION_TTL_SECONDS and bound to the service **and** the caller and end user that
verified. Every later action resolves the id back to its service, and only for that same
caller and end user: a bot (or an AI agent talked into it) can act only on a customer it
verified itself. Unknown, expired and foreign ids are refused alike (403
`verification_required`), so a refusal tells nothing about whose id it was.

Independent of any transport: one instance (services.py) serves the MCP tools and REST's
opt-in guard (params.require_verification, REQUIRE_VERIFICATION).
Only a digest of the id is a store key, so a store dump holds no usable id.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from isp_gateway.kit.actions import Action
from isp_gateway.kit.callers import Caller
from isp_gateway.kit.errors import ServiceError

if TYPE_CHECKING:
    from isp_gateway.kit.storage import Store

PREFIX = "ver_"
# An id far longer than any real one is refused before it is hashed.
MAX_ID_LENGTH = 128


class VerificationRequired(ServiceError):
    """Its message is the catalogue's sentence (the MCP tools' answer); REST's guard gives
    the variant that names the endpoint and the header (web/params.py)."""

    status_code = 403
    action = Action.VERIFICATION_REQUIRED


@dataclass(frozen=True, slots=True)
class Issued:
    verification_id: str
    expires_in: int


def _key(verification_id: str) -> str:
    digest = hashlib.sha256(verification_id.encode()).hexdigest()
    return f"verification:{digest}"


class Verifications:
    def __init__(self, store: Store, ttl_seconds: int) -> None:
        self._store = store
        self.ttl = ttl_seconds

    async def issue(self, service_id: int, caller: Caller) -> Issued:
        """A new id for `service_id`, bound to this caller and end user."""
        verification_id = PREFIX + secrets.token_urlsafe(32)
        record = {"service_id": service_id, "caller": caller.caller, "end_user": caller.end_user}
        await self._store.set(_key(verification_id), record, ttl=self.ttl)
        return Issued(verification_id, self.ttl)

    async def service_of(self, verification_id: str | None, caller: Caller) -> int:
        """The service the id was issued for, when this caller and end user hold it; else
        VerificationRequired (unknown, expired, malformed or someone else's: one answer)."""
        text = (verification_id or "").strip()
        if not text.startswith(PREFIX) or len(text) > MAX_ID_LENGTH:
            raise VerificationRequired()
        record = await self._store.get(_key(text))
        if (
            not isinstance(record, dict)
            or record.get("caller") != caller.caller
            or record.get("end_user") != caller.end_user
            or not isinstance(record.get("service_id"), int)
        ):
            raise VerificationRequired()
        service_id: int = record["service_id"]
        return service_id
