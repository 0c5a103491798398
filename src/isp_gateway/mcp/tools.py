"""The twelve MCP tools (CALLERS.md 5): arguments, scope, description and what each does
(their common parts in base.py; the money tool in money.py).

Each tool calls the same service the REST router calls (services.py's `Services`), never a
router and never a copy of a rule. Order for an agent: find (service ids only), verify
(a `verification_id`), then act with that id; every tool after verification acts on the
service inside the id, never on one the agent names.

Before verification nothing that names, locates or prices a customer is returned, not even
in an error: find_customer answers service ids, verify_customer answers verified or not and
the attempts left (never which fields matched, never the record's values).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from isp_gateway.clients.schemas import VerifyRequest
from isp_gateway.diagnose.schemas import DEFAULT_PINGS
from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.mcp.base import (
    ORDER,
    Args,
    Call,
    Outcome,
    ToolFailure,
    ToolSpec,
    Verified,
    verified,
)
from isp_gateway.mcp.money import PROMISE_PAYMENT
from isp_gateway.mcp.outage_tools import current_outages, held_ticket
from isp_gateway.tickets.errors import OutageInProgress, TicketCreationFailed

MAX_SERVICE_ID = 9_999_999_999  # at most 10 digits (CALLERS.md 2)
MAX_DIAGNOSE_WAIT = 25.0

# -- arguments --------------------------------------------------------------------------


class FindArgs(Args):
    phone: str | None = Field(default=None, max_length=40, description="Customer's phone")
    document: str | None = Field(default=None, max_length=40, description="Identity document")
    service_id: int | None = Field(default=None, ge=1, le=MAX_SERVICE_ID, description="Service id")


class VerifyArgs(Args):
    service_id: int = Field(ge=1, le=MAX_SERVICE_ID, description="From find_customer")
    name: str | None = Field(default=None, max_length=200, description="Holder's full name")
    address: str | None = Field(default=None, max_length=300, description="Service address")
    plan_name: str | None = Field(default=None, max_length=200, description="Internet plan name")
    plan_price: float | None = Field(
        default=None, ge=0, allow_inf_nan=False, description="Monthly plan price"
    )


class DiagnoseArgs(Verified):
    wait: float = Field(
        default=20.0, ge=0, le=MAX_DIAGNOSE_WAIT, description="Seconds to wait for the ping"
    )


class TicketArgs(Verified):
    subject: str = Field(
        min_length=1, max_length=200, description="One subject of list_ticket_subjects"
    )
    description: str = Field(min_length=1, max_length=5000, description="What is wrong")


class ContactArgs(Verified):
    phone: str | None = Field(default=None, max_length=40, description="New phone number")
    document: str | None = Field(default=None, max_length=40, description="New document")


class NoArgs(Args):
    pass


# -- the tools ----------------------------------------------------------------------------


def _ids(ids: list[int]) -> str:
    return ", ".join(str(i) for i in ids)


async def find_customer(call: Call, args: BaseModel) -> Outcome:
    assert isinstance(args, FindArgs)
    given = [v for v in (args.phone, args.document, args.service_id) if v not in (None, "")]
    if len(given) != 1:
        raise ToolFailure(
            "invalid_arguments", "Indique exactamente uno de: phone, document o service_id."
        )
    clients = call.services.clients
    if args.phone:
        found = await clients.by_phone(args.phone)
    elif args.document:
        found = await clients.by_document(args.document)
    else:
        assert args.service_id is not None
        found = await clients.by_service_id(args.service_id)
    ids = [found.client["service_id"]]
    sentence = (
        f"Encontré el servicio {_ids(ids)}. Para continuar, verifique la identidad del "
        "titular con verify_customer."
    )
    return Outcome({"service_ids": ids}, sentence)


async def verify_customer(call: Call, args: BaseModel) -> Outcome:
    assert isinstance(args, VerifyArgs)
    body = VerifyRequest(
        name=args.name,
        address=args.address,
        internet_plan_name=args.plan_name,
        internet_plan_price=args.plan_price,
    )
    identity = call.services.identity
    # MCP is always strict (CALLERS.md 6): name, address and the plan; too few facts is a
    # tool error naming what is missing.
    result = await identity.verify(args.service_id, body, strict=True)
    if result.is_valid:
        issued = await call.verifications.issue(args.service_id, call.caller)
        data = {
            "verified": True,
            "verification_id": issued.verification_id,
            "expires_in": issued.expires_in,
        }
        return Outcome(data, "Identidad verificada; ya puede consultar y gestionar el servicio.")
    # Never the matched fields nor the record's values (REST's debug block): only the count
    # of attempts left before the lock.
    left = result.attempts_left
    if left is None:
        left = await identity.verify_attempts_left(args.service_id)
    sentence = "Los datos no coinciden con los del titular del servicio."
    sentence += f" Quedan {left} intentos." if left else " No quedan intentos por ahora."
    return Outcome({"verified": False, "attempts_left": left}, sentence)


_STATES = {
    "active": "activo",
    "suspended": "suspendido",
    "cancelled": "cancelado",
    "free": "gratuito",
}


async def customer_summary(call: Call, service_id: int) -> Outcome:
    client = (await call.services.clients.by_service_id(service_id)).client
    data = {
        "service_id": service_id,
        "name": client["name"],
        "service_state": client["service_state"],
        "plan_name": client["internet_plan_name"],
        "plan_price": client["internet_plan_price"],
        "zone_id": client["zone_id"],
        "cut_off_date": client["cut_off_date"],
    }
    state = _STATES.get(client["service_state"] or "", "desconocido")
    sentence = f"Servicio {service_id}: estado {state}"
    if client["internet_plan_name"]:
        sentence += f", plan {client['internet_plan_name']}"
    return Outcome(data, sentence + ".")


async def customer_account(call: Call, service_id: int) -> Outcome:
    account = await call.services.accounts.account(str(service_id))
    data = dict(account.data)
    total = data.get("total_due")
    if isinstance(total, int | float) and total > 0:
        sentence = f"El saldo pendiente es de {total:,.2f}."
    else:
        sentence = "No hay saldo pendiente."
    return Outcome(data, sentence)


async def diagnose_connection(call: Call, service_id: int, args: BaseModel) -> Outcome:
    assert isinstance(args, DiagnoseArgs)
    result = await call.services.diagnose.diagnose(service_id, DEFAULT_PINGS, args.wait)
    view = result.view
    data = {"action": view.action, **view.data}
    sentence = messages.sentence(view.action, "No se pudo completar la prueba de conexión.")
    return Outcome(data, sentence)


async def customer_tickets(call: Call, service_id: int) -> Outcome:
    listed, _ = await call.services.tickets.client_tickets(service_id)
    sentence = f"Hay {len(listed)} ticket(s) abierto(s)." if listed else "No hay tickets abiertos."
    return Outcome({"tickets": listed}, sentence)


async def open_ticket(call: Call, service_id: int, args: BaseModel) -> Outcome:
    assert isinstance(args, TicketArgs)
    tickets = call.services.tickets
    try:
        # The REST write path (tickets/service.py): the zone cap, the duplicate guard and the
        # lock, with the zone and the technician of the client record.
        order = await tickets.order_for_service(service_id, args.subject, args.description)
        answer = await tickets.create(order)
    except ValueError:
        raise ToolFailure(
            "invalid_arguments", "El asunto o la descripción no son válidos."
        ) from None
    except OutageInProgress as held:
        return Outcome(*held_ticket(held))
    except TicketCreationFailed as failed:
        sentence = _NO_TICKET.get((failed.meta or {}).get("reason", ""))
        if sentence is None:
            raise
        raise ToolFailure(Action.TICKET_CREATION_FAILED, sentence) from None
    body = answer.body
    if body["action"] == Action.ZONE_TICKET_LIMIT_REACHED:
        return Outcome(
            {"outcome": body["action"], **(body["data"] or {})},
            "La zona ya tiene el máximo de tickets abiertos; no se puede abrir otro hasta que "
            "se resuelva uno.",
        )
    if body["action"] == Action.TICKET_ALREADY_OPEN:
        number = (body["data"] or {}).get("ticket_id")
        return Outcome(
            {"outcome": body["action"], "ticket": body["data"]},
            f"Ya hay un ticket abierto por ese motivo (número {number}).",
        )
    ticket = body["data"]
    sentence = f"Se abrió el ticket número {ticket.get('ticket_id')}"
    if ticket.get("end_date"):
        sentence += f"; se atenderá a más tardar el {ticket['end_date']}"
    return Outcome({"outcome": Action.TICKET_CREATED, "ticket": ticket}, sentence + ".")


_NO_TICKET = {
    "no_zone": "El servicio no tiene zona asignada; no se puede abrir un ticket desde aquí.",
    "no_technician": (
        "El servicio no tiene técnico asignado y no hay uno por defecto configurado."
    ),
}


async def update_contact(call: Call, service_id: int, args: BaseModel) -> Outcome:
    assert isinstance(args, ContactArgs)
    if not args.phone and not args.document:
        raise ToolFailure("invalid_arguments", "Indique el nuevo teléfono, el documento o ambos.")
    await call.services.updates.update(service_id, args.document, args.phone)
    given = {"phone": args.phone, "document": args.document}
    updated = {name: value for name, value in given.items() if value}
    return Outcome({"updated": updated}, "Datos de contacto actualizados.")


async def list_internet_plans(call: Call, _: BaseModel) -> Outcome:
    listing = await call.services.plans.list_plans()
    plans = [plan.model_dump() for plan in listing.plans]
    return Outcome({"plans": plans}, f"Hay {len(plans)} planes de internet.")


async def list_payment_methods(call: Call, _: BaseModel) -> Outcome:
    listing = await call.services.accounts.payment_methods()
    methods = [dict(method) for method in listing.methods]
    return Outcome({"methods": methods}, f"Hay {len(methods)} medios de pago.")


async def list_outages(call: Call, _: BaseModel) -> Outcome:
    return Outcome(*await current_outages(call.services.outages))


async def list_ticket_subjects(call: Call, _: BaseModel) -> Outcome:
    subjects = call.services.tickets.subjects()
    return Outcome(subjects, "Estos son los asuntos válidos para un ticket.")


# -- the table ----------------------------------------------------------------------------

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "find_customer",
        "clients:read",
        "Step 1: find a customer's service by exactly one of phone, document or service_id. "
        "Returns only service ids (never a name or address): ask the customer to confirm "
        f"their identity next with verify_customer. {ORDER}",
        FindArgs,
        read_only=True,
        plain=find_customer,
    ),
    ToolSpec(
        "verify_customer",
        "clients:verify",
        "Step 2: check the identity of the holder of a service with the name, the address "
        "and the plan (plan_name or plan_price, or both) exactly as the customer states them "
        "(never guess or reuse values). On success returns a verification_id (valid "
        "expires_in seconds) that the other tools need; on failure the attempts left before "
        "a temporary lock; with a fact missing, an error naming it. "
        f"{ORDER}",
        VerifyArgs,
        read_only=False,
        plain=verify_customer,
    ),
    ToolSpec(
        "customer_summary",
        "clients:read",
        verified("The verified customer's name, service state, plan and price, zone and cut-off"),
        Verified,
        read_only=True,
        on_service=customer_summary,
    ),
    ToolSpec(
        "customer_account",
        "accounts:read",
        verified("What the verified customer owes (pending invoices) and the service state."),
        Verified,
        read_only=True,
        on_service=customer_account,
    ),
    PROMISE_PAYMENT,
    ToolSpec(
        "diagnose_connection",
        "network:ping",
        verified(
            "Why the verified customer has no internet: cancelled, suspended (with the debt), "
            "a general outage, or a ping of the antenna (waits up to `wait` seconds)."
        ),
        DiagnoseArgs,
        read_only=False,
        on_service_args=diagnose_connection,
    ),
    ToolSpec(
        "customer_tickets",
        "tickets:read",
        verified("The verified customer's open support tickets, newest first."),
        Verified,
        read_only=True,
        on_service=customer_tickets,
    ),
    ToolSpec(
        "open_ticket",
        "tickets:write",
        verified(
            "Open a support ticket for the verified customer (zone and technician come from "
            "the customer's record). Use diagnose_connection first; the subject must be one "
            "of list_ticket_subjects. May answer that the zone is at its cap, that a "
            "ticket for that subject is already open, or that a general outage covers the "
            "customer (no ticket needed)."
        ),
        TicketArgs,
        read_only=False,
        on_service_args=open_ticket,
    ),
    ToolSpec(
        "update_contact",
        "clients:write",
        verified("Change the verified customer's phone and/or identity document."),
        ContactArgs,
        read_only=False,
        on_service_args=update_contact,
    ),
    ToolSpec(
        "list_internet_plans",
        "plans:read",
        "The ISP's internet plans (no customer data; no verification needed).",
        NoArgs,
        read_only=True,
        plain=list_internet_plans,
    ),
    ToolSpec(
        "list_payment_methods",
        "accounts:read",
        "How customers can pay (no customer data; no verification needed).",
        NoArgs,
        read_only=True,
        plain=list_payment_methods,
    ),
    ToolSpec(
        "list_ticket_subjects",
        "tickets:read",
        "The valid ticket subjects for open_ticket, by priority (no verification needed).",
        NoArgs,
        read_only=True,
        plain=list_ticket_subjects,
    ),
    ToolSpec(
        "current_outages",
        "outages:read",
        "The general outages now active (a router's flag in the ISP backend): each with its "
        "description, since when and the zones affected. Before opening a ticket for a "
        "customer without internet (no customer data; no verification needed).",
        NoArgs,
        read_only=True,
        plain=list_outages,
    ),
)

BY_NAME = {tool.name: tool for tool in TOOLS}


async def target(tool: ToolSpec, call: Call, args: Args) -> int | None:
    """The service a call is about: a verified tool's, from its verification id
    (VerificationRequired otherwise); the one verify_customer names; else None."""
    if tool.plain is None:
        assert isinstance(args, Verified)
        return await call.verifications.service_of(args.verification_id, call.caller)
    return args.service_id if isinstance(args, VerifyArgs) else None


async def run(tool: ToolSpec, call: Call, args: Args, service_id: int | None) -> Outcome:
    """Run one tool, a verified one on `service_id` (its `target`); errors are the
    services' own (ServiceError)."""
    if tool.plain is not None:
        return await tool.plain(call, args)
    assert service_id is not None
    if tool.on_service is not None:
        return await tool.on_service(call, service_id)
    assert tool.on_service_args is not None
    return await tool.on_service_args(call, service_id, args)


__all__ = ["BY_NAME", "TOOLS", "Call", "Outcome", "ToolFailure", "ToolSpec", "run", "target"]
