"""Client update (spec 4.6, CALLERS.md 2): the PUT of a document and/or phone.

The phone and document rules, a fresh read of the record's phone field (the new number
replaces the first; the others stay), the write, and the patch of the cached list. Every
update records its audit event (CALLERS.md 4), `updated` or `failed`, with the names of the
fields it changes, never their values.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from isp_gateway.clients.misses import (
    client_not_found,
    document_values,
    miss_key,
    recheck_key,
    unable_to_fetch,
)
from isp_gateway.clients.phones import is_update_phone, replace_first_phone
from isp_gateway.clients.service import DOCUMENT
from isp_gateway.kit.actions import Action
from isp_gateway.kit.errors import (
    InvalidInput,
    ServiceError,
    StoreUnavailable,
    UpstreamError,
    UpstreamRateLimited,
    UpstreamUnauthorized,
)
from isp_gateway.upstream import clients as upstream
from isp_gateway.upstream.clients import Client

if TYPE_CHECKING:
    from isp_gateway.clients.service import ClientService
    from isp_gateway.parts import Parts


@contextlib.contextmanager
def _update_errors() -> Iterator[None]:
    """The upstream's failures on the read and the write of an update, as its answers."""
    try:
        yield
    except upstream.ProfileNotFound:
        raise client_not_found() from None
    except UpstreamUnauthorized:
        raise unable_to_fetch() from None
    except UpstreamRateLimited:
        raise
    except UpstreamError:
        raise ServiceError(action=Action.CLIENT_UPDATE_FAILED, variant="failed") from None


class UpdateService:
    def __init__(self, parts: Parts, *, clients: ClientService) -> None:
        self.settings, self.store, self.gateway = parts.settings, parts.store, parts.gateway
        self.audit, self.clients = parts.audit, clients

    async def update(self, service_id: int, document: str | None, phone: str | None) -> None:
        """Write the new document and/or phone; the audit event says which fields changed
        (or were to change) and how it ended, never their values."""
        fields = [
            field
            for field, value in (("document", document), ("phone", phone))
            if value and value.strip()
        ]
        try:
            new_document, new_phone, phone_field = await self._checked(service_id, document, phone)
        except StoreUnavailable:
            raise
        except ServiceError as exc:
            # Refused before the write (a value, an unknown service, the backend's read).
            self._refused(service_id, {"fields": fields, "reason": exc.action})
            raise
        try:
            with _update_errors():
                await upstream.update_profile(self.gateway, service_id, new_document, phone_field)
        except StoreUnavailable:
            raise
        except ServiceError as exc:
            details = {"fields": fields, "reason": exc.action}
            if exc.action == Action.CLIENT_UPDATE_FAILED:
                # Sent, and its answer failed or was lost: it may be written, one by one.
                await self.audit.record(
                    "client_update", "failed", service_id=service_id, details=details
                )
            else:
                # Refused, nothing written: the budget, the backend's 404 or its key refused.
                self._refused(service_id, details)
            raise
        await self._after_update(service_id, new_document, new_phone, phone_field)
        await self.audit.record(
            "client_update", "updated", service_id=service_id, details={"fields": fields}
        )

    def _refused(self, service_id: int, details: dict[str, Any]) -> None:
        """An update refused with nothing written: counted as every refusal is (CALLERS.md
        6), one event a caller, service, reason and minute, so a loop of them never pushes
        the writes out of the audit."""
        self.audit.count_about("client_update", "failed", service_id, details)

    async def _checked(
        self, service_id: int, document: str | None, phone: str | None
    ) -> tuple[str | None, str | None, str | None]:
        """The new document and phone, checked, and the record's phone field with the new
        number first (read fresh from the backend), before anything is written."""
        new_document = document.strip() if document and document.strip() else None
        new_phone = phone.strip() if phone and phone.strip() else None
        if new_document is None and new_phone is None:
            raise InvalidInput(action=Action.CLIENT_UPDATE_FAILED, variant="nothing")
        if new_document is not None and not DOCUMENT.fullmatch(new_document):
            raise InvalidInput(action=Action.INVALID_DOCUMENT, variant="format")
        phone_field = None
        if new_phone is not None:
            if not is_update_phone(new_phone):
                raise InvalidInput(action=Action.INVALID_PHONE, variant="format")
            new_phone = self.clients.normalized_phone(new_phone)
            # CALLERS.md 2: the new number replaces the record's first; its others stay.
            phone_field = await self._phone_field_with(service_id, new_phone)
        return new_document, new_phone, phone_field

    async def _phone_field_with(self, service_id: int, number: str) -> str:
        """The service's `telefono` field, read fresh from the upstream (a cached copy
        could miss a number added since, which the write would then wipe), with `number`
        in place of its first number."""
        with _update_errors():
            rows = await upstream.query_clients(
                self.gateway, "service_id", str(service_id), limit=5
            )
        # The upstream may ignore the filter: only the row of that service counts.
        record = next((r for r in rows if r["client"]["service_id"] == service_id), None)
        if record is None:
            raise client_not_found()
        s = self.settings
        return replace_first_phone(
            record["client"]["phone"], number, s.PHONE_COUNTRY_CODE, s.PHONE_NATIONAL_LENGTH
        )

    async def _after_update(
        self,
        service_id: int,
        document: str | None,
        phone: str | None,
        phone_field: str | None = None,
    ) -> None:
        store = self.store
        # A miss remembered for the new values would hide the client for a minute.
        if document is not None:
            for value in document_values(document):
                await store.delete(miss_key("document", value))
                await store.delete(recheck_key("document", value))
        if phone is not None:
            await store.delete(miss_key("phone", phone))
            await store.delete(recheck_key("phone", phone))
        snapshot = await self.clients.cache.peek()
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
            client["phone"] = phone_field or phone
        await self.clients.remember({**record, "client": client})
