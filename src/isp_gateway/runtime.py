"""What the lifespan builds and the routers use: one typed object on `app.state.runtime`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated

import httpx
from fastapi import Depends, Request

from isp_gateway.auth.tokens import TokenCache
from isp_gateway.settings import Settings
from isp_gateway.store import Store
from isp_gateway.throttle import FailureThrottle
from isp_gateway.upstream.gateway import UpstreamGateway
from isp_gateway.upstream.planner import RefreshPlanner

if TYPE_CHECKING:
    from isp_gateway.accounts.service import AccountService
    from isp_gateway.clients.service import ClientService
    from isp_gateway.diagnose.outages import OutageService
    from isp_gateway.diagnose.service import DiagnoseService
    from isp_gateway.network.service import PingService
    from isp_gateway.observability.metrics import Metrics
    from isp_gateway.plans.service import PlanService
    from isp_gateway.tickets.service import TicketService


@dataclass
class Runtime:
    settings: Settings
    store: Store
    http: httpx.AsyncClient
    gateway: UpstreamGateway
    login_throttle: FailureThrottle
    token_cache: TokenCache = field(default_factory=TokenCache)
    metrics: Metrics | None = None  # None when METRICS_ENABLED is false
    # Plans the refresh of every whole list kept warm (CachedResource(planner=...)).
    planner: RefreshPlanner | None = None
    # Feature services, built in the lifespan after the parts above.
    plans: PlanService = field(init=False)
    clients: ClientService = field(init=False)
    tickets: TicketService = field(init=False)
    pings: PingService = field(init=False)
    accounts: AccountService = field(init=False)
    outages: OutageService = field(init=False)
    diagnose: DiagnoseService = field(init=False)


async def get_runtime(request: Request) -> Runtime:
    # async on purpose: FastAPI runs a plain `def` dependency in a thread pool, which cost
    # more than the whole lookup it serves.
    runtime: Runtime = request.app.state.runtime
    return runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
