"""The customer tools: find, verify, then the verified customer's summary, account, line
diagnosis and contact update. Each calls the service the REST router calls."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from isp_gateway.auth.scopes import ACCOUNTS_READ, has_scope
from isp_gateway.clients.schemas import Price, VerifyRequest
from isp_gateway.diagnose.schemas import DEFAULT_PINGS
from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.kit.prices import FORMATS
from isp_gateway.mcp.tools.base import (
    MAX_SERVICE_ID,
    NUMBER_NOTE,
    ORDER,
    Args,
    Call,
    Outcome,
    TextOrNumber,
    ToolFailure,
    ToolSpec,
    Verified,
    ids,
    verified_description,
)

MAX_DIAGNOSE_WAIT = 25.0


class FindArgs(Args):
    phone: TextOrNumber = Field(
        default=None, max_length=40, description="The customer's phone" + NUMBER_NOTE
    )
    document: TextOrNumber = Field(
        default=None, max_length=40, description="The holder's identity document" + NUMBER_NOTE
    )
    service_id: int | None = Field(
        default=None, ge=1, le=MAX_SERVICE_ID, description="The service number"
    )


class VerifyArgs(Args):
    service_id: int = Field(ge=1, le=MAX_SERVICE_ID, description="From find_customer")
    name: str | None = Field(default=None, max_length=200, description="Holder's full name")
    address: str | None = Field(default=None, max_length=300, description="Service address")
    plan_name: str | None = Field(default=None, max_length=200, description="Internet plan name")
    plan_price: Price = Field(
        default=None,
        description=f"Monthly plan price as the customer says it: {FORMATS} (a number, or "
        "the text: `65.000` is sixty-five thousand; one or two digits after the last "
        "separator are cents)",
    )


class DiagnoseArgs(Verified):
    wait: float = Field(
        default=20.0, ge=0, le=MAX_DIAGNOSE_WAIT, description="Seconds to wait for the ping"
    )


class ContactArgs(Verified):
    phone: TextOrNumber = Field(default=None, max_length=40, description="New phone number")
    document: TextOrNumber = Field(default=None, max_length=40, description="New document")


VERIFY_HINT = (
    "Ask the customer for the holder's full name, the service address and the plan (its "
    "name or its monthly price, or both), and pass them to verify_customer exactly as "
    "stated, with service_id {service_id}."
)
SEVERAL_HINT = (
    "This {kind} has several services ({ids}). Ask the customer which one they mean (e.g. "
    "by its address) and verify that one; never present the others as theirs."
)


async def find_customer(call: Call, args: FindArgs) -> Outcome:
    given = [v for v in (args.phone, args.document, args.service_id) if v not in (None, "")]
    if len(given) != 1:
        raise ToolFailure(
            "invalid_arguments",
            messages.say(Action.VALIDATION_ERROR, "one_lookup"),
            "Pass exactly one of phone, document or service_id.",
        )
    clients = call.services.clients
    if args.phone:
        found = await clients.by_phone(args.phone)
    elif args.document:
        found = await clients.by_document(args.document)
    else:
        assert args.service_id is not None
        found = await clients.by_service_id(args.service_id)
    first = found.client["service_id"]
    # By document or phone, the other services sharing it (REST's meta.other_service_ids).
    found_ids = [first, *(found.others or [])]
    if len(found_ids) == 1:
        sentence = messages.say(Action.CLIENT_FOUND, "service", ids=first)
        hint = VERIFY_HINT.format(service_id=first)
    else:
        sentence = messages.say(
            Action.CLIENT_FOUND, "services", count=len(found_ids), ids=ids(found_ids)
        )
        kind = "phone" if args.phone else "document"
        hint = SEVERAL_HINT.format(kind=kind, ids=ids(found_ids))
    return Outcome({"service_ids": found_ids}, sentence, hint)


async def verify_customer(call: Call, args: VerifyArgs) -> Outcome:
    body = VerifyRequest(
        name=args.name,
        address=args.address,
        internet_plan_name=args.plan_name,
        internet_plan_price=args.plan_price,
    )
    identity = call.services.identity
    # MCP is always strict (CALLERS.md 6): name, address and the plan; too few facts is a
    # tool error naming what is missing (`missing`).
    result = await identity.verify(args.service_id, body, strict=True)
    if result.is_valid:
        issued = await call.verifications.issue(args.service_id, call.caller)
        data = {
            "verified": True,
            "verification_id": issued.verification_id,
            "expires_in": issued.expires_in,
        }
        hint = (
            "Pass this verification_id to the other tools; it names this service, for this "
            f"conversation, for {issued.expires_in} seconds."
        )
        return Outcome(data, messages.say(Action.CLIENT_VERIFIED, "agent"), hint)
    # Never the matched fields nor the record's values (REST's debug block): only the count
    # of attempts left before the lock.
    left = result.attempts_left
    if left is None:
        left = await identity.verify_attempts_left(args.service_id)
    failed = Action.CLIENT_VERIFICATION_FAILED
    if left:
        sentence = messages.say(failed, "attempts", left=left)
        hint = (
            "Ask the customer to check the details they gave; do not guess or reuse values "
            "from anywhere else."
        )
    else:
        sentence = messages.say(failed, "no_attempts")
        hint = "Verification is locked for now; do not retry until later."
    return Outcome({"verified": False, "attempts_left": left}, sentence, hint)


async def customer_summary(call: Call, service_id: int, _: Verified) -> Outcome:
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
    known = {"active", "suspended", "cancelled", "free"}
    state_key = client["service_state"] if client["service_state"] in known else "unknown"
    state = messages.say(Action.CLIENT_FOUND, f"state_{state_key}")
    plan = client["internet_plan_name"]
    if plan:
        sentence = messages.say(
            Action.CLIENT_FOUND, "summary_plan", service_id=service_id, state=state, plan=plan
        )
    else:
        sentence = messages.say(Action.CLIENT_FOUND, "summary", service_id=service_id, state=state)
    return Outcome(data, sentence)


async def customer_account(call: Call, service_id: int, _: Verified) -> Outcome:
    account = await call.services.accounts.account(str(service_id))
    data = dict(account.data)
    total = data.get("total_due")
    if isinstance(total, int | float) and total > 0:
        sentence = messages.say(Action.ACCOUNT_FOUND, "owes", total=messages.amount(total))
        hint = "list_payment_methods says how the customer can pay."
        return Outcome(data, sentence, hint)
    return Outcome(data, messages.say(Action.ACCOUNT_FOUND, "nothing"))


async def diagnose_connection(call: Call, service_id: int, args: DiagnoseArgs) -> Outcome:
    with_debt = has_scope(call.caller.scopes, ACCOUNTS_READ)
    result = await call.services.diagnose.diagnose(
        service_id, DEFAULT_PINGS, args.wait, with_debt=with_debt
    )
    view = result.view
    data: dict[str, Any] = {"action": view.action, **view.data}
    hint = None
    if view.action in (Action.NO_INTERNET, Action.INTERMITTENT_CONNECTION):
        hint = (
            "Offer a ticket (open_ticket, subject 'No Tiene Internet' or 'Internet "
            "Intermitente') unless zone_blocked is true or open_tickets has one already."
        )
    elif view.action == Action.PING_PENDING:
        hint = "The ping is still running: call diagnose_connection again in a few seconds."
    elif data.get("next_step") == "promise":
        # MONEY.md 1: a promise would reconnect the service today.
        hint = (
            "Suspended for debt: the customer can pay (list_payment_methods) or, if they ask "
            "for time, agree a date and call promise_payment."
        )
    return Outcome(data, messages.sentence(view.action, messages.say(Action.PING_FAILED)), hint)


async def update_contact(call: Call, service_id: int, args: ContactArgs) -> Outcome:
    if not args.phone and not args.document:
        raise ToolFailure(
            "invalid_arguments",
            messages.say(Action.VALIDATION_ERROR, "contact"),
            "Pass phone, document or both.",
        )
    await call.services.updates.update(service_id, args.document, args.phone)
    given = {"phone": args.phone, "document": args.document}
    updated = {name: value for name, value in given.items() if value}
    return Outcome({"updated": updated}, messages.say(Action.CLIENT_UPDATED))


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "find_customer",
        "clients:read",
        "Step 1: find a customer's services by exactly one of phone, document or service_id "
        "(a phone or document may be text or a number). Returns only service ids (never a "
        "name or address); several when the customer has several services: ask which one. "
        f"Then verify the holder with verify_customer. {ORDER}",
        FindArgs,
        read_only=True,
        plain=find_customer,
    ),
    ToolSpec(
        "verify_customer",
        "clients:verify",
        "Step 2: check the identity of the holder of a service with the name, the address "
        "and the plan (plan_name or plan_price, or both) exactly as the customer states them "
        f"(never guess or reuse values; plan_price as they say it: {FORMATS}). On success "
        "returns a verification_id (valid expires_in seconds) that the other tools need; on "
        "failure the attempts left before a temporary lock; with a fact missing, an error "
        f"naming it (`missing`). {ORDER}",
        VerifyArgs,
        read_only=False,
        plain=verify_customer,
    ),
    ToolSpec(
        "customer_summary",
        "clients:read",
        verified_description(
            "The verified customer's name, service state, plan and price, zone and cut-off."
        ),
        Verified,
        read_only=True,
        on_service=customer_summary,
    ),
    ToolSpec(
        "customer_account",
        "accounts:read",
        verified_description(
            "What the verified customer owes (pending invoices) and the service state."
        ),
        Verified,
        read_only=True,
        on_service=customer_account,
    ),
    ToolSpec(
        "diagnose_connection",
        "network:ping",
        verified_description(
            "Why the verified customer has no internet: cancelled, suspended (with the debt "
            "when this key also holds accounts:read; else next_step alone), a general outage, "
            "or a ping of the antenna (waits up to `wait` seconds)."
        ),
        DiagnoseArgs,
        read_only=False,
        on_service=diagnose_connection,
    ),
    ToolSpec(
        "update_contact",
        "clients:write",
        verified_description(
            "Change the verified customer's phone and/or identity document (text or numbers)."
        ),
        ContactArgs,
        read_only=False,
        on_service=update_contact,
    ),
)
