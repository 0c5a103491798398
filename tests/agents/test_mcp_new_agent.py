"""Issue 28, MCP as an LLM meets it: an agent with the key docs/agents.md recommends, talking
to the real gateway through the SDK's client over HTTP, with nothing but the docs, the
server's instructions, the tools' schemas and their answers to go on."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from isp_gateway.auth.keys import generate_key, new_entry, write_key_entries
from isp_gateway.mcp.tools import BY_NAME, TOOLS
from tests.agents.conftest import Result, call, customer, open_ticket, statement
from tests.conftest import Gateway, Simulator, StartGateway, StartSimulator

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "agents.md"
README = ROOT / "README.md"
TOOL_NAMES = {tool.name for tool in TOOLS}
ROOMY = 1000


def recommended_scopes() -> list[str]:
    """The scopes of the agent key the README recommends, as a reader copies them; the
    agents' guide (docs/agents.md) recommends the same key."""
    text = README.read_text(encoding="utf-8")
    found = re.search(r"keys create support-agent --scopes (\S+)", text)
    assert found, "the README recommends no agent key"
    guide = DOCS.read_text(encoding="utf-8").split("## The recommended agent key", 1)[1]
    assert f"--scopes {found.group(1)} " in guide, "docs/agents.md recommends another key"
    return found.group(1).split(",")


@asynccontextmanager
async def session_with(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    """An MCP session on `url`/mcp with these headers; yields (session, initialize result)."""
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        initialized = await session.initialize()
        yield session, initialized


def keyed_gateway(
    tmp_path: Path,
    simulator: Simulator,
    start_gateway: StartGateway,
    keys: dict[str, list[str]],
    **settings: Any,
) -> tuple[Gateway, dict[str, str]]:
    """A gateway with an API key of each scope list; the keys by name."""
    made = {name: generate_key() for name in keys}
    path = tmp_path / "keys.json"
    write_key_entries(path, [new_entry(made[n], n, scopes, None) for n, scopes in keys.items()])
    return start_gateway(simulator.url, API_KEYS_FILE=str(path), **settings), made


def colombian(price: float) -> str:
    """A price as a Colombian writes it: 45000 -> "45.000"."""
    return f"{round(price):,}".replace(",", ".")


def a_customer(gw: Gateway, *, technician: bool = True) -> dict[str, Any]:
    """An active customer with a price, a plan, a zone, (no) technician and no open ticket."""
    for row in gw.get("/api/v1/clients/").json()["data"]:
        if (
            row["service_state"] == "active"
            and row["name"]
            and row["address"]
            and row["internet_plan_name"]
            and row["internet_plan_price"]
            and row["document"]
            and row["zone_id"] is not None
            and (row["technician_id"] is not None) == technician
            and not gw.get(f"/api/v1/clients/{row['service_id']}/tickets").json()["data"]
        ):
            return customer(gw, row["service_id"])
    pytest.fail("no such customer in the simulator's dataset")


def sentences_name_no_tool(results: list[Result]) -> None:
    """Issue 28.7: what is said to the customer names no tool."""
    for result in results:
        for tool in TOOL_NAMES:
            assert tool not in result.sentence, (tool, result.sentence)


# -- the new agent's conversation ------------------------------------------------------------


async def test_a_new_agent_with_the_documented_key(
    tmp_path: Path, simulator: Simulator, start_gateway: StartGateway
) -> None:
    """find -> verify with the price as "45.000" -> summary -> ticket, with the key the docs
    recommend (issue 28.1, .5, .7, .9): every step answers, no sentence names a tool."""
    scopes = recommended_scopes()
    assert "clients:read" in scopes and "audit:read" not in scopes
    gw, keys = keyed_gateway(
        tmp_path, simulator, start_gateway, {"agent": scopes},
        MAX_ACTIVE_TICKETS_PER_ZONE=ROOMY,
    )  # fmt: skip
    client = a_customer(gw)
    headers = {"X-API-Key": keys["agent"], "X-End-User-Id": "chat-28"}
    async with session_with(gw.url, headers) as (session, initialized):
        assert "find_customer by" in initialized.instructions
        assert "Not available to this key" in initialized.instructions  # update_contact
        found = await call(session, "find_customer", document=client["document"])
        assert not found.is_error, found.texts
        sid = client["service_id"]
        assert found.data["service_ids"][0] == sid
        assert "verify_customer" in found.hint
        verified = await call(
            session,
            "verify_customer",
            service_id=sid,
            name=client["name"],
            address=client["address"],
            plan_price=colombian(client["internet_plan_price"]),
        )
        assert verified.data.get("verified") is True, verified.texts
        vid = verified.data["verification_id"]
        summary = await call(session, "customer_summary", verification_id=vid)
        assert summary.data["service_id"] == sid and str(sid) in summary.sentence
        opened = await open_ticket(session, vid, "Internet Lento", "Navega muy lento desde ayer.")
        assert not opened.is_error, opened.texts
        assert str(opened.data["ticket"]["ticket_id"]) in opened.sentence
    sentences_name_no_tool([found, verified, summary, opened])


# -- 28.1: a missing scope is named ----------------------------------------------------------


async def test_a_key_without_a_scope_is_told_which(
    tmp_path: Path, simulator: Simulator, start_gateway: StartGateway
) -> None:
    """The README's old agent key (no clients:read): find_customer is not listed, calling it
    names the scope, and the instructions do not say "Always: 1) find_customer"."""
    old = ["clients:verify", "tickets:read", "tickets:write", "network:ping"]
    gw, keys = keyed_gateway(tmp_path, simulator, start_gateway, {"old": old})
    async with session_with(gw.url, {"X-API-Key": keys["old"]}) as (session, initialized):
        listed = {tool.name for tool in (await session.list_tools()).tools}
        refused = await call(session, "find_customer", phone="3001234567")
    assert "find_customer" not in listed and "verify_customer" in listed
    assert refused.is_error
    assert refused.data["error"] == "insufficient_scope"
    assert refused.data["required"] == "clients:read"
    assert "clients:read" in refused.sentence and "clients:read" in refused.hint
    instructions = initialized.instructions
    assert "find_customer by" not in instructions
    assert "find_customer needs the scope clients:read" in instructions
    assert "list_internet_plans (needs plans:read)" in instructions


# -- 28.2, 28.3: every service of a document; numbers for texts --------------------------------


async def test_find_customer_names_every_service_of_a_document(
    start_simulator: StartSimulator, start_gateway: StartGateway
) -> None:
    """As REST's meta.other_service_ids (issue 28.2); a document or phone sent as a JSON
    number is found as its text (issue 28.3)."""
    # The demo's dataset with its answer cases, where a document names two services.
    sim = start_simulator(clients=200, seed=1, answer_cases=True)
    gw = start_gateway(sim.url)
    by_document: dict[str, list[int]] = defaultdict(list)
    for row in sim.state.dataset.clients:
        document = str(row.get("cedula") or "")
        if document.isdigit() and document[0] != "0":
            by_document[document].append(row["id_servicio"])
    document = next(d for d, ids in by_document.items() if len(ids) > 1)
    rest = gw.get(f"/api/v1/clients/by-document/{document}").json()
    expected = [rest["data"]["service_id"], *rest["meta"]["other_service_ids"]]
    single = next(d for d, ids in by_document.items() if len(ids) == 1)
    phone = customer(gw, by_document[single][0])["phone"].split(",")[0].strip()
    async with session_with(gw.url, gw.auth) as (session, _):
        shared = await call(session, "find_customer", document=int(document))
        alone = await call(session, "find_customer", document=int(single))
        by_phone = await call(session, "find_customer", phone=int(re.sub(r"\D", "", phone)))
    assert not shared.is_error, shared.texts
    assert shared.data["service_ids"] == expected and len(expected) > 1
    assert "several services" in shared.hint
    assert alone.data["service_ids"] == by_document[single]
    assert by_document[single][0] in by_phone.data["service_ids"], by_phone.texts


# -- 28.4: verification_id required ----------------------------------------------------------


async def test_verification_id_is_a_required_string(gateway: Gateway) -> None:
    async with session_with(gateway.url, gateway.auth) as (session, _):
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        missing = await call(session, "customer_summary")
    verified_tools = [name for name, spec in BY_NAME.items() if spec.verified]
    assert len(verified_tools) == 7  # promise_payment (MONEY.md 3) too
    for name in verified_tools:
        schema = listed[name].input_schema
        assert "verification_id" in schema["required"], name
        assert schema["properties"]["verification_id"]["type"] == "string", name
    # Without it: the guard's own answer, with the way to get one.
    assert missing.data["error"] == "verification_required"
    assert "verify_customer" in missing.hint


# -- 28.5: prices as Colombians write them -----------------------------------------------------


async def test_plan_price_as_written_verifies_and_junk_costs_no_attempt(gateway: Gateway) -> None:
    client = a_customer(gateway)
    sid, price = client["service_id"], client["internet_plan_price"]
    facts = {"service_id": sid, "name": client["name"], "address": client["address"]}
    async with session_with(gateway.url, {**gateway.auth, "X-End-User-Id": "p"}) as (s, _):
        listed = {tool.name: tool for tool in (await s.list_tools()).tools}
        junk = await call(s, "verify_customer", **facts, plan_price="sesenta y cinco mil")
        wrong = await call(s, "verify_customer", **facts, plan_price=colombian(price + 5000))
        forms = [colombian(price), f"{round(price):,}", f"${colombian(price)}", f"{price:.2f}"]
        results = [await call(s, "verify_customer", **facts, plan_price=p) for p in forms]
    description = listed["verify_customer"].input_schema["properties"]["plan_price"]["description"]
    assert "65.000" in description and "65,000" in description
    assert junk.is_error and junk.data["error"] == "invalid_arguments"
    assert "plan_price" in junk.sentence
    # The junk cost nothing: the first real mismatch leaves 4 of 5 attempts.
    assert wrong.data == {"verified": False, "attempts_left": 4}
    for form, result in zip(forms, results, strict=True):
        assert result.data.get("verified") is True, (form, result.texts)


async def test_missing_names_the_tools_own_arguments(gateway: Gateway) -> None:
    """A verify short of a fact names what is missing as the tool's arguments, so that an
    agent that passes what `missing` names is verified (it named `internet_plan_name`, a
    REST field, and passing it was `invalid_arguments`: seen by the docs probe)."""
    client = a_customer(gateway)
    facts = {"service_id": client["service_id"], "name": client["name"]}
    async with session_with(gateway.url, {**gateway.auth, "X-End-User-Id": "m"}) as (s, _):
        listed = {tool.name: tool for tool in (await s.list_tools()).tools}
        short = await call(s, "verify_customer", **facts)
        told = {"address": client["address"], "plan_name": client["internet_plan_name"]}
        completed = await call(
            s, "verify_customer", **facts, **{name: told[name] for name in short.data["missing"]}
        )
    arguments = listed["verify_customer"].input_schema["properties"]
    assert short.is_error and short.data["error"] == "client_verification_failed"
    assert sorted(short.data["missing"]) == ["address", "plan_name"]
    assert set(short.data["missing"]) <= set(arguments)
    assert completed.data.get("verified") is True, completed.texts


async def test_a_lookup_miss_is_said_in_the_deployments_language(gateway: Gateway) -> None:
    """find_customer's refusals are sentences for the customer in MESSAGES_LANGUAGE, as
    docs/agents.md says, not the English texts the spec quotes for REST's lookups ('Client
    not found' and 'Invalid document format' reached a Spanish chat: seen by the docs probe)."""
    async with session_with(gateway.url, {**gateway.auth, "X-End-User-Id": "l"}) as (s, _):
        miss = await call(s, "find_customer", phone="3001234567")
        bad = await call(s, "find_customer", document="x")
    assert miss.is_error and miss.data["error"] == "client_not_found"
    assert miss.sentence == "No encontré ningún cliente con ese dato."
    assert bad.is_error and bad.data["error"] in ("invalid_document", "invalid_arguments")
    assert "Invalid document format" not in bad.texts


# -- 28.6: plans with prices and speeds --------------------------------------------------------


async def test_plans_with_prices_and_speeds_and_one_plan_by_name(gateway: Gateway) -> None:
    async with session_with(gateway.url, gateway.auth) as (session, _):
        listed = await call(session, "list_internet_plans")
        priced = next(p for p in listed.data["plans"] if p["price"] is not None)
        by_id = await call(session, "internet_plan", plan_id=priced["plan_id"])
        by_name = await call(session, "internet_plan", name=priced["name"].lower())
        unknown = await call(session, "internet_plan", name=priced["name"] + " ultra xl")
    assert {"price", "download_speed", "upload_speed"} <= set(listed.data["plans"][0])
    assert by_id.data["plan"] == priced and by_name.data["plan"] == priced
    assert priced["name"] in by_id.sentence and "Mbps" in by_id.sentence
    assert unknown.is_error and unknown.data["error"] == "internet_plan_not_found"
    assert priced["name"] in unknown.data["closest"]


# -- 28.8: open_ticket names the cause ---------------------------------------------------------


async def test_open_ticket_names_each_cause(
    simulator: Simulator, start_gateway: StartGateway
) -> None:
    """A record without technician (no DEFAULT_TECHNICIAN_ID), an unknown subject (with the
    closest), and a retry with the same idempotency_key (the same ticket, replayed)."""
    gw = start_gateway(simulator.url, MAX_ACTIVE_TICKETS_PER_ZONE=ROOMY)
    lone, staffed = a_customer(gw, technician=False), a_customer(gw)
    async with session_with(gw.url, {**gw.auth, "X-End-User-Id": "t"}) as (session, _):
        results = []
        for client in (lone, staffed):
            verified = await call(
                session, "verify_customer", service_id=client["service_id"], **statement(client)
            )
            results.append(verified.data["verification_id"])
        no_tech = await call(
            session, "open_ticket", verification_id=results[0], subject="Internet Lento",
            description="Lento.",
        )  # fmt: skip
        bad_subject = await call(
            session, "open_ticket", verification_id=results[1], subject="sin internet",
            description="No hay servicio.",
        )  # fmt: skip
        ticket = {"subject": "No Tiene Internet", "description": "No hay servicio."}
        first = await call(
            session, "open_ticket", verification_id=results[1], idempotency_key="k-1", **ticket
        )
        again = await call(
            session, "open_ticket", verification_id=results[1], idempotency_key="k-1", **ticket
        )
    assert no_tech.is_error and no_tech.data["reason"] == "no_technician"
    assert "técnico" in no_tech.sentence and "DEFAULT_TECHNICIAN_ID" in no_tech.hint
    assert bad_subject.is_error and bad_subject.data["reason"] == "unknown_subject"
    assert "sin internet" in bad_subject.sentence
    assert bad_subject.data["closest"] == "No Tiene Internet"
    assert "No Tiene Internet" in bad_subject.sentence
    assert not first.is_error, first.texts
    assert again.data["ticket"]["ticket_id"] == first.data["ticket"]["ticket_id"]
    assert again.data["replayed"] is True and "replayed" not in first.data
    sentences_name_no_tool([no_tech, bad_subject, first, again])


# -- 28.9: the docs -------------------------------------------------------------------------


def test_the_docs_give_a_key_snippet_and_every_tools_scope() -> None:
    text = DOCS.read_text(encoding="utf-8")
    desktop = text.split("## A desktop MCP client", 1)[1].split("##", 1)[0]
    assert '"X-API-Key": "igw_..."' in desktop and "Bearer" not in desktop
    table = dict(re.findall(r"^\| `(\w+)` \| `([a-z:*]+)` \|", text, flags=re.MULTILINE))
    assert table == {tool.name: tool.scope for tool in TOOLS}
    for form in ("65.000", "65,000", "$65.000", "65000.00"):
        assert form in text.split("### Prices", 1)[1]
