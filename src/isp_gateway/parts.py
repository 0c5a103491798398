"""The long-lived parts every feature service is built on, made once by the lifespan.

Only infrastructure travels in it (settings, the store, the one upstream gateway, the maker
of lists kept warm, the audit log, the worker's stop): a service's sibling services are
constructor arguments of their own, so the graph in services.py shows who uses whom.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from isp_gateway.kit.stopping import Stopping

if TYPE_CHECKING:
    from isp_gateway.audit.service import AuditLog
    from isp_gateway.kit.cache import Lists
    from isp_gateway.settings import Settings
    from isp_gateway.store import Store
    from isp_gateway.upstream.gateway import UpstreamGateway


@dataclass(frozen=True, slots=True)
class Parts:
    settings: Settings
    store: Store
    gateway: UpstreamGateway
    lists: Lists
    # Who did what (CALLERS.md 4): a service records an event where it decides the outcome.
    audit: AuditLog
    # Set when the worker is asked to stop (stopping.py); never, for parts that do not serve.
    stopping: Stopping = field(default_factory=Stopping)
