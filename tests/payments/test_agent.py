"""An agent's money conversation over /mcp with the SDK's own client (MONEY.md 3): find,
verify, the account, promise_payment, the account again showing the promise; the refusals
as tool results with their Spanish sentences; the tool's guard and description."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from isp_gateway.payments.ledger import MADE, Promise
from tests.agents.conftest import call, mcp_session
from tests.payments.conftest import (
    DEBTORS,
    OWES_NOTHING,
    TODAY,
    StartMoney,
    day,
    oldest_invoice,
    on_server,
    sim_promises,
)

pytestmark = pytest.mark.anyio

STATEMENT = {"address": "CALLE 1 # 2-3", "plan_name": "PLAN 10MB"}


async def test_find_verify_account_promise_account(start_money: StartMoney) -> None:
    sim, gw = start_money()
    sid = DEBTORS[0]
    async with mcp_session(gw, end_user="chat-7781") as agent:
        found = await call(agent, "find_customer", service_id=sid)
        assert found.data == {"service_ids": [sid]}
        verified = await call(
            agent, "verify_customer", service_id=sid, name=f"CLIENTE {sid}", **STATEMENT
        )
        vid = verified.data["verification_id"]
        account = await call(agent, "customer_account", verification_id=vid)
        assert not account.is_error
        assert account.data["service_state"] == "suspended"
        assert account.data["promise"] is None
        diagnosed = await call(agent, "diagnose_connection", verification_id=vid, wait=0)
        assert diagnosed.data["next_step"] == "promise"
        # The next step for the model, apart from the customer's sentence (issue 28.7).
        assert diagnosed.hint is not None and "promise_payment" in diagnosed.hint
        assert "promise_payment" not in diagnosed.sentence
        promised = await call(agent, "promise_payment", verification_id=vid, until=day(4))
        assert not promised.is_error, promised.texts
        assert promised.data["outcome"] == "payment_promise_created"
        assert promised.data["promise"]["until"] == day(4)
        assert promised.sentence.startswith("Listo: reactivamos su servicio hasta el ")
        assert "$40.000" in promised.sentence
        again = await call(agent, "customer_account", verification_id=vid)
        assert again.data["promise"] == {"until": day(4), "invoice_id": oldest_invoice(sid)}
        assert again.data["service_state"] == "active"
        # Asked again: a result to relay, not a second promise.
        twice = await call(agent, "promise_payment", verification_id=vid, until=day(2))
        assert not twice.is_error
        assert twice.data["outcome"] == "promise_already_active"
        assert "vigente" in twice.sentence
    assert len(sim_promises(sim)) == 1
    # The REST account shows the same promise.
    rest = gw.get(f"/api/v1/clients/{sid}/account").json()["data"]
    assert rest["promise"] == {"until": day(4), "invoice_id": oldest_invoice(sid)}


async def test_refusals_are_results_with_their_sentences(start_money: StartMoney) -> None:
    sim, gw = start_money()
    sid = DEBTORS[1]
    broken = Promise(
        invoice_id=oldest_invoice(sid),
        until=TODAY - timedelta(days=3),
        created=TODAY - timedelta(days=6),
        at=time.time() - 6 * 86_400,
        caller="jwt:bot",
        end_user="chat-1",
        state=MADE,
        suspended=True,
        fingerprint="earlier",
    )
    on_server(gw, gw.runtime.services.payments.ledger.write(sid, [broken]))
    async with mcp_session(gw, end_user="chat-1") as agent:
        verified = await call(
            agent, "verify_customer", service_id=sid, name=f"CLIENTE {sid}", **STATEMENT
        )
        vid = verified.data["verification_id"]
        # Out of the window: an error with the window's sentence, nothing read or sent.
        far = await call(agent, "promise_payment", verification_id=vid, until=day(30))
        assert far.is_error and far.data["error"] == "validation_error"
        assert "a más tardar el" in far.sentence
        bad = await call(agent, "promise_payment", verification_id=vid, until="28/11/2026")
        assert bad.is_error and bad.data["error"] == "invalid_arguments"
        # The broken promise's cooldown: a result saying until when.
        barred = await call(agent, "promise_payment", verification_id=vid, until=day(2))
        assert not barred.is_error
        assert barred.data["outcome"] == "promise_not_allowed"
        assert barred.data["reason"] == "broken_promise"
        assert "no se cumplió" in barred.sentence
        not_pending = await call(
            agent, "promise_payment", verification_id=vid, until=day(2), invoice_id=999
        )
        assert not_pending.is_error and not_pending.data["error"] == "invoice_not_pending"
        # Without a verification: verify first, as every verified tool.
        refused = await call(agent, "promise_payment", until=day(2))
        assert refused.is_error and refused.data["error"] == "verification_required"
    assert sim_promises(sim) == []


async def test_the_tool_tells_the_agent_when_to_offer_it(start_money: StartMoney) -> None:
    _, gw = start_money()
    async with mcp_session(gw) as agent:
        tools = {tool.name: tool for tool in (await agent.list_tools()).tools}
    tool = tools["promise_payment"]
    assert tool.description is not None
    assert "suspended for debt" in tool.description
    assert "say it back" in tool.description
    assert set(tool.input_schema["properties"]) == {"verification_id", "until", "invoice_id"}
    assert tool.annotations is not None and tool.annotations.read_only_hint is False


async def test_nothing_owed_is_no_reason_to_offer_payment_methods(start_money: StartMoney) -> None:
    """A suspended customer who owes nothing is refused a promise; the agent is told to offer
    a reconnection, as diagnose's next_step "reconnect" does, not the payment methods (the
    hint sent the agent to list_payment_methods for a debt of 0: seen by the docs probe)."""
    _, gw = start_money()
    async with mcp_session(gw, end_user="chat-0") as agent:
        verified = await call(
            agent,
            "verify_customer",
            service_id=OWES_NOTHING,
            name=f"CLIENTE {OWES_NOTHING}",
            **STATEMENT,
        )
        vid = verified.data["verification_id"]
        diagnosed = await call(agent, "diagnose_connection", verification_id=vid, wait=0)
        refused = await call(agent, "promise_payment", verification_id=vid, until=day(2))
    assert diagnosed.data["next_step"] == "reconnect"
    assert refused.data == {"outcome": "promise_not_allowed", "reason": "nothing_owed"}
    assert refused.hint is not None
    assert "list_payment_methods" not in refused.hint and "Reconexión" in refused.hint
