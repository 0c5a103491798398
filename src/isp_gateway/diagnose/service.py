"""Diagnose (BEYOND.md): one call that answers "I have no internet".

Checks in this order, answering the first that applies: cancelled, suspended (with what is
owed and the next step: pay, or a payment promise when its rules allow one, or reconnect when
nothing is owed; what is owed only to a caller that may read accounts), a general outage on the
client's router, else a ping (the ping service's own task records and coalescing,
long-polled up to `wait`). Every answer carries the client's state,
zone figures and open tickets, so the bot knows whether to offer a ticket.

Composes other features, taken as constructor arguments (ARCHITECTURE.md "Growing past the
spec"). Once caches are warm the only upstream calls are the ping's, plus the one fresh read
that confirms a suspended or cancelled state older than STATE_FRESH_SECONDS. An upstream
failure in the state, debt or outage checks raises (502): never a guess that the line is fine.

Audit (CALLERS.md 4): one `diagnose` event per answer, its action as the outcome (an error's
action when it raises); the ping it starts has its own `ping` events (network/service.py).
Kept one by one, like the ping, when it had the backend start a ping task. Any other answer
(from the cached state, debt or outage, a joined ping, an error) asked nothing new of the
backend and a caller may repeat it at will, with no limit of its own: counted per caller,
service, outcome and minute (CALLERS.md 6), so a loop of it never pushes the pings and
diagnoses that happened out of the network stream.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from isp_gateway.accounts.service import AccountService
from isp_gateway.clients.service import ClientService
from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.kit.errors import ServiceError, StoreUnavailable
from isp_gateway.network.service import PingFailed, PingService, PingView
from isp_gateway.outages.service import OutageService
from isp_gateway.payments.service import PaymentService
from isp_gateway.tickets.service import TicketService

if TYPE_CHECKING:
    from isp_gateway.kit.recorder import Recorder


@dataclass(frozen=True)
class Diagnosis:
    """What the router renders as is (always HTTP 200): an envelope's fields, and whether a
    cached copy it read was stale."""

    view: PingView
    stale: bool
    # This diagnose had the backend start a ping task (not joined one already running).
    pinged: bool = False


@dataclass(frozen=True, slots=True)
class DiagnoseService:
    """Holds only the services it composes (built in services.py)."""

    clients: ClientService
    accounts: AccountService
    tickets: TicketService
    outages: OutageService
    pings: PingService
    audit: Recorder
    payments: PaymentService

    async def diagnose(
        self, service_id: int, pings: int, wait: float, *, with_debt: bool
    ) -> Diagnosis:
        """The answer, audited with its action (or the action of the error it raises).
        `with_debt`: the caller holds `accounts:read`, so a suspended service's answer
        carries what is owed (balance, total_due, pending_invoices), as the account would."""
        try:
            result = await self._diagnose(service_id, pings, wait, with_debt)
        except StoreUnavailable:
            raise  # the audit lives in the store too: the 503 says it all
        except ServiceError as exc:
            unknown = exc.action == Action.CLIENT_NOT_FOUND
            self.audit.count_about("diagnose", exc.action, None if unknown else service_id)
            raise
        if result.pinged:
            await self.audit.record("diagnose", result.view.action, service_id=service_id)
        else:
            self.audit.count_about("diagnose", result.view.action, service_id)
        return result

    async def _diagnose(
        self, service_id: int, pings: int, wait: float, with_debt: bool
    ) -> Diagnosis:
        # 404 for an unknown client (a miss asks the upstream for that one service); a
        # suspended or cancelled state is confirmed fresh when the cached row is old.
        record, stale = await self.clients.confirmed_record(service_id)
        client = record["client"]
        state = client["service_state"]
        zone_id = client["zone_id"]
        open_tickets, tickets_stale = await self.tickets.open_tickets(service_id)
        blocked = False
        if zone_id is not None:
            zone = await self.tickets.zone_status(zone_id, fresh=False)
            blocked = bool(zone["is_blocked"])
        data: dict[str, Any] = {
            "service_id": service_id,
            "service_state": state,
            "zone_id": zone_id,
            "zone_blocked": blocked,
            "open_tickets": open_tickets,
        }
        stale = stale or tickets_stale

        async def owed() -> list[int]:
            invoices, _, _ = await self.accounts.pending_of(record["username"])
            return [invoice["invoice_id"] for invoice in invoices]

        # MONEY.md 1: an active payment promise, whatever the outcome (the owed list is read,
        # from its cache, only when the ledger holds one).
        data["promise"] = await self.payments.ledger.active(service_id, owed)

        def info(action: str, variant: str = "") -> Diagnosis:
            message = messages.say(action, variant)
            return Diagnosis(PingView(True, "info", action, data, message), stale)

        if state == "cancelled":
            return info(Action.SERVICE_CANCELLED)
        if state == "suspended":
            invoices, _, invoices_stale = await self.accounts.pending_of(record["username"])
            stale = stale or invoices_stale
            # Summed exactly, then rounded to cents, as the account answer does.
            total_due = round(math.fsum(i["total"] for i in invoices), 2)
            if with_debt:
                # The figures are the account's (CALLERS.md 3): a key with network:ping
                # alone is told the state and the next step, not what the customer owes.
                data["balance"] = client["outstanding_balance"]
                data["total_due"] = total_due
                data["pending_invoices"] = invoices
            # What the bot offers next: paying what is owed (or, when the rules allow one, a
            # payment promise that reconnects today), else a reconnection.
            if total_due > 0:
                if await self.payments.promise_allowed(service_id, invoices):
                    data["next_step"] = "promise"
                    return info(Action.SERVICE_SUSPENDED, "promise")
                data["next_step"] = "pay"
                return info(Action.SERVICE_SUSPENDED)
            data["next_step"] = "reconnect"
            # Nothing owed (CALLERS.md 2): the message never mentions a debt.
            return info(Action.SERVICE_SUSPENDED, "reconnect")
        router_id = await self.outages.router_of(service_id, record["router_id"])
        router = await self.outages.router(router_id) if router_id is not None else None
        if router is not None and router.outage:
            data["outage_description"] = router.outage_description
            return info(Action.ZONE_OUTAGE, "diagnosis")
        return await self._ping(data, service_id, pings, wait, stale)

    async def _ping(
        self, data: dict[str, Any], service_id: int, pings: int, wait: float, stale: bool
    ) -> Diagnosis:
        figures: dict[str, Any] = {"task_id": None, "sent": None, "received": None}
        figures["loss_percent"] = None
        try:
            started = await self.pings.create(service_id, pings)
        except PingFailed as refused:
            data.update(figures)
            message = messages.say(Action.PING_FAILED, "refused")
            return Diagnosis(PingView(False, "error", refused.action, data, message), stale)
        view = await self.pings.result(started.task_id, wait)
        figures["task_id"] = started.task_id
        for name in ("sent", "received", "loss_percent"):
            figures[name] = view.data.get(name)
        data.update(figures)
        answer = PingView(view.ok, view.type, view.action, data, view.message)
        return Diagnosis(answer, stale, pinged=not started.joined)
