"""What the lifespan owns: one typed object on `app.state.runtime`.

The long-lived parts (settings, store, upstream gateway, metrics, planner, the token cache
and the login throttle) and the service graph built from them (services.py). Routers take
a service through services.py's dependencies, not through this object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

from fastapi import Depends, Request

from isp_gateway.audit.service import AuditLog
from isp_gateway.auth.keys import KeyRing
from isp_gateway.auth.tokens import TokenCache
from isp_gateway.kit import deadline
from isp_gateway.kit.stopping import Stopping
from isp_gateway.settings import Settings
from isp_gateway.store import Store
from isp_gateway.upstream.gateway import UpstreamGateway
from isp_gateway.upstream.planner import RefreshPlanner

if TYPE_CHECKING:
    from isp_gateway.observability.metrics import Metrics
    from isp_gateway.services import Services


@dataclass
class Runtime:
    settings: Settings
    store: Store
    gateway: UpstreamGateway
    audit: AuditLog
    token_cache: TokenCache = field(default_factory=TokenCache)
    metrics: Metrics | None = None  # None when METRICS_ENABLED is false
    # Plans the refresh of every whole list kept warm (CachedResource(planner=...)).
    planner: RefreshPlanner | None = None
    # The API keys of API_KEYS_FILE (CALLERS.md 3); a ring of no keys when it is unset.
    key_ring: KeyRing = field(default_factory=lambda: KeyRing(None))
    # Set the moment this worker is asked to stop (stopping.py).
    stopping: Stopping = field(default_factory=Stopping)
    # Built in the lifespan after the parts above (services.start_services).
    services: Services = field(init=False)


async def get_runtime(request: Request) -> Runtime:
    # async on purpose: FastAPI runs a plain `def` dependency in a thread pool, which cost
    # more than the whole lookup it serves.
    runtime: Runtime = request.app.state.runtime
    # Every answer within UPSTREAM_TIMEOUT_SECONDS + 2 s (CALLERS.md 2): the margin is for
    # the answer itself; shared loads are waited for only until the upstream's timeout.
    deadline.start(runtime.settings.UPSTREAM_TIMEOUT_SECONDS, runtime.gateway)
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
