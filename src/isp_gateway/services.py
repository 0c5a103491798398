"""The service graph: every feature service, built in one place and handed to the routers.

`start_services` builds each service from exactly what it uses (settings, store, gateway,
metrics, planner, and the sibling services it composes), starts the ones that keep lists
warm, and registers their stops on the lifespan's exit stack (closed in reverse order).
Routers take a service through the `Annotated` aliases below; nothing reaches a sibling
through a shared bag of everything.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, TypeVar

from fastapi import Depends, Request

from isp_gateway.accounts.service import AccountService
from isp_gateway.auth.service import AuthService
from isp_gateway.clients.identity import IdentityService
from isp_gateway.clients.service import ClientService
from isp_gateway.clients.update import UpdateService
from isp_gateway.diagnose.service import DiagnoseService
from isp_gateway.kit import deadline
from isp_gateway.kit.cache import Lists
from isp_gateway.kit.verifications import Verifications
from isp_gateway.network.service import PingService
from isp_gateway.outages.service import OutageService
from isp_gateway.parts import Parts
from isp_gateway.plans.service import PlanService
from isp_gateway.tickets.service import TicketService

if TYPE_CHECKING:
    from isp_gateway.audit.service import AuditLog
    from isp_gateway.kit.stopping import Stopping
    from isp_gateway.observability.metrics import Metrics
    from isp_gateway.settings import Settings
    from isp_gateway.store import Store
    from isp_gateway.upstream.gateway import UpstreamGateway
    from isp_gateway.upstream.planner import RefreshPlanner

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Services:
    plans: PlanService
    clients: ClientService
    identity: IdentityService
    updates: UpdateService
    tickets: TicketService
    pings: PingService
    accounts: AccountService
    outages: OutageService
    diagnose: DiagnoseService
    auth: AuthService
    # Verification ids (CALLERS.md 5): issued by a REST or MCP verify, checked by both.
    verifications: Verifications


async def start_services(
    stack: AsyncExitStack,
    settings: Settings,
    store: Store,
    gateway: UpstreamGateway,
    metrics: Metrics | None,
    planner: RefreshPlanner | None,
    audit: AuditLog,
    stopping: Stopping,
) -> Services:
    lists = Lists(store, float(settings.STALE_IF_ERROR_SECONDS), metrics, planner)
    parts = Parts(settings, store, gateway, lists, audit, stopping)
    plans = PlanService(parts)
    clients = ClientService(parts)
    verifications = Verifications(store, settings.VERIFICATION_TTL_SECONDS)
    identity = IdentityService(parts, clients, plans, verifications)
    updates = UpdateService(parts, clients)
    tickets = TicketService(parts, clients, metrics)
    pings = PingService(parts, clients)
    accounts = AccountService(parts, clients)
    outages = OutageService(parts)
    for service in (plans, clients, tickets, pings, accounts, outages):
        await service.start()
        stack.push_async_callback(service.aclose)
    diagnose = DiagnoseService(clients, accounts, tickets, outages, pings, audit)
    auth = AuthService(parts)
    return Services(
        plans,
        clients,
        identity,
        updates,
        tickets,
        pings,
        accounts,
        outages,
        diagnose,
        auth,
        verifications,
    )


# The dependencies are async on purpose: FastAPI runs a plain `def` dependency in a thread
# pool, which cost more than the whole lookup it serves.
def _services(request: Request) -> Services:
    runtime = request.app.state.runtime
    # Every answer within UPSTREAM_TIMEOUT_SECONDS + 2 s (CALLERS.md 2): the margin is for
    # the answer itself; shared loads are waited for only until the upstream's timeout.
    # Set where a route takes its service, so every business route has it.
    deadline.start(runtime.settings.UPSTREAM_TIMEOUT_SECONDS, runtime.gateway)
    services: Services = runtime.services
    return services


def _service(pick: Callable[[Services], T]) -> Callable[[Request], Awaitable[T]]:
    """The dependency that hands a route one service of the graph."""

    async def dependency(request: Request) -> T:
        return pick(_services(request))

    return dependency


PlansDep = Annotated[PlanService, Depends(_service(lambda graph: graph.plans))]
ClientsDep = Annotated[ClientService, Depends(_service(lambda graph: graph.clients))]
IdentityDep = Annotated[IdentityService, Depends(_service(lambda graph: graph.identity))]
UpdatesDep = Annotated[UpdateService, Depends(_service(lambda graph: graph.updates))]
TicketsDep = Annotated[TicketService, Depends(_service(lambda graph: graph.tickets))]
PingsDep = Annotated[PingService, Depends(_service(lambda graph: graph.pings))]
AccountsDep = Annotated[AccountService, Depends(_service(lambda graph: graph.accounts))]
DiagnoseDep = Annotated[DiagnoseService, Depends(_service(lambda graph: graph.diagnose))]
AuthDep = Annotated[AuthService, Depends(_service(lambda graph: graph.auth))]
