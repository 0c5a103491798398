"""The one place the service is put together, read by the app factory only (app.py).

`start_runtime` builds the long-lived parts (store, upstream gateway, budget, planner, audit,
key ring, token cache) and every feature service from exactly what it uses, starts the ones
that keep lists warm, and registers every stop on the lifespan's exit stack (closed in
reverse order). The result is one `Runtime` on `app.state.runtime`: the parts the edges read
(credentials, rate limits, readiness) and the graph of services (`runtime.services`).

Each feature declares its own dependency alias next to its router (`TicketsDep`, ...) through
`web/deps.py`, which finds the service in the graph by its type: nothing imports this module
but the app factory, so no feature depends on the whole graph.
"""

from __future__ import annotations

import asyncio
import logging
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar

from isp_gateway.accounts.service import AccountService
from isp_gateway.audit.service import AuditLog
from isp_gateway.auth.keys import KeyRing
from isp_gateway.auth.service import AuthService
from isp_gateway.auth.tokens import TokenCache
from isp_gateway.clients.identity import IdentityService
from isp_gateway.clients.service import ClientService
from isp_gateway.clients.update import UpdateService
from isp_gateway.diagnose.service import DiagnoseService
from isp_gateway.kit.cache import Lists
from isp_gateway.kit.errors import StoreUnavailable
from isp_gateway.kit.stopping import Stopping
from isp_gateway.kit.verifications import Verifications
from isp_gateway.network.service import PingService
from isp_gateway.notices.sender import build_webhook_client
from isp_gateway.notices.service import Notices
from isp_gateway.outages.service import OutageService
from isp_gateway.parts import Parts
from isp_gateway.payments.ledger import PromiseLedger
from isp_gateway.payments.service import PaymentService
from isp_gateway.plans.service import PlanService
from isp_gateway.settings import Settings
from isp_gateway.store import Store
from isp_gateway.store.factory import build_store
from isp_gateway.tickets.service import TicketService
from isp_gateway.upstream.budget import RateBudget
from isp_gateway.upstream.gateway import UpstreamGateway, build_http_client
from isp_gateway.upstream.planner import RefreshPlanner

if TYPE_CHECKING:
    from isp_gateway.observability.metrics import Metrics

log = logging.getLogger("isp_gateway")

T = TypeVar("T")

# A readiness probe must answer well within a load balancer's probe timeout (usually 1-5 s).
CHECK_SECONDS = 2.0
# The newest answer about our key any worker or replica has had ([time, refused]): /ready's
# `upstream` check is the same on every worker of the store, whichever answers the probe.
KEY_ANSWER = "ready:upstream_key"
KEY_ANSWER_TTL = 86400


@dataclass(frozen=True, slots=True)
class Services:
    """The feature services, each built once."""

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
    payments: PaymentService
    # Verification ids (CALLERS.md 5): issued by a REST or MCP verify, checked by both.
    verifications: Verifications
    by_type: dict[type, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The routers' dependencies (web/deps.py) find a service by its type: one dict read.
        found = {type(getattr(self, f.name)): getattr(self, f.name) for f in fields(self)[:-1]}
        object.__setattr__(self, "by_type", found)

    def of(self, kind: type[T]) -> T:
        service: T = self.by_type[kind]
        return service


@dataclass(frozen=True, slots=True)
class Runtime:
    """What the lifespan owns, on `app.state.runtime`: the long-lived parts and the graph."""

    settings: Settings
    store: Store
    gateway: UpstreamGateway
    audit: AuditLog
    planner: RefreshPlanner
    # The API keys of API_KEYS_FILE (CALLERS.md 3); a ring of no keys when it is unset.
    key_ring: KeyRing
    services: Services
    metrics: Metrics | None = None  # None when METRICS_ENABLED is false
    token_cache: TokenCache = field(default_factory=TokenCache)
    # Set the moment this worker is asked to stop (kit/stopping.py).
    stopping: Stopping = field(default_factory=Stopping)

    async def readiness(self) -> dict[str, str]:
        """`/ready`'s checks (web/health.py), each "ok" or what is wrong."""
        store = await self._store_check()
        checks = {
            "store": store,
            "clients": await self._clients_check(),
            "upstream": await self._upstream_check(shared=store == "ok"),
        }
        if self.key_ring.enabled:
            # `unreadable` while API_KEYS_FILE cannot be read or parsed: the last good keys
            # still serve, but a key made or revoked since is not seen (CALLERS.md 6).
            checks["keys"] = self.key_ring.status()
        return checks

    async def _store_check(self) -> str:
        try:
            # A write: a Redis demoted to a replica answers reads and refuses every write, and
            # so nearly every request (503 store_unavailable); a read said `ok`.
            await asyncio.wait_for(self.store.set("ready:probe", 1, ttl=60), CHECK_SECONDS)
        except (StoreUnavailable, TimeoutError):
            return "unavailable"
        return "ok"

    async def _clients_check(self) -> str:
        cache = self.services.clients.cache
        if cache.local is not None:
            return "ok"  # this process has held the list: it has loaded at least once
        try:
            # Another worker sharing the store may have loaded it.
            at = await asyncio.wait_for(cache.loaded_at(), CHECK_SECONDS)
        except (StoreUnavailable, TimeoutError):
            at = None
        if at is not None:
            return "ok"
        try:
            # Or be loading it for the first time: `loading 12000/20000` (issue 28).
            progress = await asyncio.wait_for(cache.progress(), CHECK_SECONDS)
        except (StoreUnavailable, TimeoutError):
            progress = None
        return "not_loaded" if progress is None else progress.label()

    async def _upstream_check(self, *, shared: bool) -> str:
        """`unauthorized` while the upstream's last word about our key was a 401/403 (a
        wrong or revoked UPSTREAM_NET_KEY: nothing this replica asks will be answered). An
        upstream that is merely down is not a reason to leave the pool: cached copies still
        serve. The last word of any worker sharing the store: each worker's own flipped
        /ready between 503 and 200 on one replica, whichever worker answered the probe (and
        a worker that had seen a 403 stayed 503 after the key was fixed, until it called the
        backend itself)."""
        gateway = self.gateway
        mine = [gateway.key_answered_at, gateway.key_refused]
        newest = mine
        if shared:
            try:
                seen = await asyncio.wait_for(self.store.get(KEY_ANSWER), CHECK_SECONDS)
                if isinstance(seen, list) and len(seen) == 2 and seen[0] >= mine[0]:
                    newest = seen
                elif mine[0]:
                    await self.share_key_answer(mine)
            except (StoreUnavailable, TimeoutError):
                pass
            gateway.key_refused_shared = bool(newest[1])
        return "unauthorized" if newest[1] else "ok"

    async def share_key_answer(self, answer: list[Any]) -> None:
        """The upstream's answer about our key ([time, refused]) for every worker's /ready."""
        write = self.store.set(KEY_ANSWER, answer, ttl=KEY_ANSWER_TTL)
        await asyncio.wait_for(write, CHECK_SECONDS)


async def start_runtime(
    stack: AsyncExitStack, settings: Settings, metrics: Metrics | None
) -> Runtime:
    """Everything the service runs on, started, with its stops on `stack`."""
    # Closed in reverse order: services, then the upstream client, then the store.
    store = await build_store(settings)
    stack.push_async_callback(store.close)
    http = build_http_client(settings)
    stack.push_async_callback(http.aclose)
    budget = RateBudget(
        store,
        settings.UPSTREAM_RATE_PER_MINUTE,
        settings.UPSTREAM_RATE_PER_HOUR,
        reserve=settings.UPSTREAM_INTERACTIVE_RESERVE,
        share=settings.UPSTREAM_CALLER_SHARE,
        share_reserve=settings.UPSTREAM_SHARE_RESERVE,
    )
    planner = RefreshPlanner(budget)
    if metrics is not None:
        metrics.watch_budget(budget)
        await metrics.start()
        stack.push_async_callback(metrics.aclose)
    gateway = UpstreamGateway(settings, http, budget, metrics)
    audit = AuditLog(store, settings.AUDIT_MAX_EVENTS, enabled=settings.AUDIT_ENABLED)
    # Its counted refusals are flushed every second, and last before the store closes.
    audit.start()
    stack.push_async_callback(audit.aclose)
    stopping = Stopping()
    # Notices go to the receivers, never through the upstream's client: their own, closed
    # after the services that queue them (OUTAGES.md 3).
    webhooks = build_webhook_client()
    stack.push_async_callback(webhooks.aclose)
    notices = Notices(settings=settings, store=store, http=webhooks, audit=audit, metrics=metrics)
    await notices.start()
    stack.push_async_callback(notices.aclose)
    lists = Lists(store, float(settings.STALE_IF_ERROR_SECONDS), metrics, planner)
    parts = Parts(settings, store, gateway, lists, audit, stopping)
    services = await _start_services(stack, parts, metrics, notices)
    if metrics is not None:
        metrics.watch_planner(planner)
    planner.log_plan("start-up")
    runtime = Runtime(
        settings=settings,
        store=store,
        gateway=gateway,
        audit=audit,
        planner=planner,
        key_ring=KeyRing(settings.API_KEYS_FILE),
        services=services,
        metrics=metrics,
        stopping=stopping,
    )
    gateway.share_key_answer = runtime.share_key_answer
    return runtime


async def _start_services(
    stack: AsyncExitStack, parts: Parts, metrics: Metrics | None, notices: Notices
) -> Services:
    settings, store, audit = parts.settings, parts.store, parts.audit
    plans = PlanService(parts)
    clients = ClientService(parts)
    verifications = Verifications(store, settings.VERIFICATION_TTL_SECONDS)
    identity = IdentityService(parts, clients=clients, plans=plans, verifications=verifications)
    updates = UpdateService(parts, clients=clients)
    outages = OutageService(parts, clients=clients, notices=notices)
    tickets = TicketService(parts, clients=clients, outages=outages, metrics=metrics)
    pings = PingService(parts, clients=clients)
    # The payment-promise ledger (MONEY.md 1): the account shows its active promise.
    ledger = PromiseLedger(store, settings)
    accounts = AccountService(parts, clients=clients, promises=ledger)
    for service in (plans, clients, tickets, pings, accounts, outages):
        await service.start()
        stack.push_async_callback(service.aclose)
    payments = PaymentService(parts, clients=clients, accounts=accounts, ledger=ledger)
    diagnose = DiagnoseService(clients, accounts, tickets, outages, pings, audit, payments)
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
        payments,
        verifications,
    )
