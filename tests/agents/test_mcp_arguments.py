"""A tool's arguments as a careless or hostile agent sends them, over the SDK client against
the real app and simulator: the tool answers what REST answers for the same input, in
words the agent can act on."""

from __future__ import annotations

import pytest

from tests.agents.conftest import call, mcp_session, pick_customer, statement
from tests.conftest import Gateway, module_pair_fixtures

pytestmark = pytest.mark.anyio

simulator, gateway = module_pair_fixtures()


def wrong_type(result: object, field: str) -> bool:
    data = getattr(result, "data", {})
    return data.get("error") == "invalid_arguments" and field in data.get("message", "")


async def test_a_boolean_is_no_number(gateway: Gateway) -> None:
    # REST's bodies are strict (`true` where a number belongs is a 422); pydantic's lax mode
    # read MCP's `true` as 1: `service_id: true` looked up or verified service 1, and
    # `plan_price: true` spent one of the holder's verification attempts on a price of 1.
    client = pick_customer(gateway)
    service_id = client["service_id"]
    facts = statement(client)
    async with mcp_session(gateway, end_user="bool-agent") as session:
        found = await call(session, "find_customer", service_id=True)
        assert wrong_type(found, "service_id"), found.texts
        verified = await call(session, "verify_customer", **{**facts, "service_id": True})
        assert wrong_type(verified, "service_id"), verified.texts
        priced = {"name": facts["name"], "address": facts["address"], "plan_price": True}
        by_price = await call(session, "verify_customer", service_id=service_id, **priced)
        assert wrong_type(by_price, "plan_price"), by_price.texts
        plan = await call(session, "internet_plan", plan_id=True)
        assert wrong_type(plan, "plan_id"), plan.texts
        # Not one attempt was spent: the first real mismatch still leaves all but one.
        wrong = {**facts, "address": "Calle 1 # 2-3 Barrio Inventado"}
        failed = await call(session, "verify_customer", service_id=service_id, **wrong)
        limit = gateway.settings.VERIFY_MAX_FAILURES
        assert failed.data == {"verified": False, "attempts_left": limit - 1}, failed.texts
        vid = (await call(session, "verify_customer", service_id=service_id, **facts)).data
        verification_id = vid["verification_id"]
        for tool, arguments in (
            ("diagnose_connection", {"wait": True}),
            ("promise_payment", {"until": "2030-01-01", "invoice_id": True}),
        ):
            result = await call(session, tool, verification_id=verification_id, **arguments)
            field = next(iter(k for k, v in arguments.items() if v is True))
            assert wrong_type(result, field), (tool, result.texts)
