"""The audit as the features see it: somewhere to record who did what (CALLERS.md 4).

A service records an event where it decides the outcome (`record`, kept one by one), or
counts a refusal (`count`, CALLERS.md 6: one event per caller, event and minute, so that
refusals never flush the audit). What a caller can repeat at no cost is counted per
service and reason (`count_about`: a write refused before anything reached the backend, a
ping that joined a running task, a diagnose answered from what the gateway holds, a verify
of a service that does not exist), and a
success it can repeat freely is kept once a minute and counted after
(`record_once_a_minute`: a verify or resolve passed again). The audit package (audit/service.py,
`AuditLog`) is the one implementation, built by the lifespan. Features depend on this
protocol only, so the audit's own routes may sit above them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from isp_gateway.kit.callers import Caller


class Recorder(Protocol):
    async def record(
        self,
        event: str,
        outcome: str,
        *,
        service_id: int | str | None = None,
        details: Mapping[str, Any] | None = None,
        caller: Caller | None = None,
        request_id: str | None = None,
    ) -> dict[str, Any]: ...

    def count(
        self,
        event: str,
        outcome: str,
        *,
        service_id: int | str | None = None,
        details: Mapping[str, Any] | None = None,
        kind: str | None = None,
        caller: Caller | None = None,
        anonymous_from: str | None = None,
    ) -> None: ...

    def count_about(
        self,
        event: str,
        outcome: str,
        service_id: int | None,
        details: Mapping[str, Any] | None = None,
        reason: str | None = None,
    ) -> None: ...

    async def record_once_a_minute(
        self,
        event: str,
        outcome: str,
        service_id: int,
        details: Mapping[str, Any] | None = None,
        kind: str | None = None,
    ) -> None: ...
