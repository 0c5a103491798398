"""A tool's arguments as a careless or hostile agent sends them, over the SDK client against
the real app and simulator: the tool answers what REST answers for the same input, in
words the agent can act on."""

from __future__ import annotations

import pytest

from tests.agents.conftest import call, mcp_session, pick_customer, statement
from tests.conftest import Gateway, Simulator, StartGateway, module_pair_fixtures

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


async def test_a_refusal_is_said_in_the_deployments_language(
    gateway: Gateway, simulator: Simulator, start_gateway: StartGateway
) -> None:
    # The spec pins REST's 'Client not found', 'Invalid document format' and 'Cliente no
    # encontrado' in both languages; an MCP result's first text is a sentence for the
    # customer in MESSAGES_LANGUAGE (docs/agents.md), so a Spanish bot read out 'Client not
    # found' and an English one 'Cliente no encontrado'.
    spanish = {
        "lookup": "No encontré ningún cliente con ese dato.",
        "document": "El documento no es válido (3 a 20 letras o dígitos).",
    }
    english = {
        "lookup": "I found no customer with that detail.",
        "document": "The document is not valid (3 to 20 letters or digits).",
    }
    english_gateway = start_gateway(simulator.url, MESSAGES_LANGUAGE="en")
    facts = {"name": "Juan Carlos Perez", "address": "Vereda El Rosal casa 4", "plan_name": "X"}
    for gw, said in ((gateway, spanish), (english_gateway, english)):
        async with mcp_session(gw, end_user="language-agent") as session:
            by_phone = await call(session, "find_customer", phone="3999999999")
            by_id = await call(session, "find_customer", service_id=9_999_999)
            by_document = await call(session, "find_customer", document="12-34")
            verify = await call(session, "verify_customer", service_id=9_999_999, **facts)
        for result, sentence in (
            (by_phone, said["lookup"]),
            (by_id, said["lookup"]),
            (verify, said["lookup"]),
            (by_document, said["document"]),
        ):
            assert result.is_error, result.texts
            assert result.sentence == sentence, result.texts
            assert result.data["message"] == sentence
        # REST keeps the spec's words.
        rest = gw.get("/api/v1/clients/by-phone/3999999999").json()
        assert rest["message"] == "Client not found"


async def test_missing_names_the_tools_arguments(gateway: Gateway) -> None:
    # `missing` named REST's field `internet_plan_name`; verify_customer has no such argument
    # (an agent that passed it got invalid_arguments: an extra input), only plan_name or
    # plan_price.
    client = pick_customer(gateway)
    service_id = client["service_id"]
    async with mcp_session(gateway, end_user="missing-agent") as session:
        named = await call(session, "verify_customer", service_id=service_id, name=client["name"])
        assert named.data["error"] == "client_verification_failed", named.texts
        assert named.data["missing"] == ["address", "plan_name"]
        facts = {"name": client["name"], "address": client["address"]}
        given = await call(session, "verify_customer", service_id=service_id, **facts)
        assert given.data["missing"] == ["plan_name"], given.texts
        # What it names completes the verification.
        plan = {"plan_name": client["internet_plan_name"]}
        done = await call(session, "verify_customer", service_id=service_id, **facts, **plan)
        assert done.data["verified"] is True, done.texts
