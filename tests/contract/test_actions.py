"""Every action is a symbol (kit/actions.py) with its texts in the message catalogue
(kit/messages), in Spanish and in English, and every action the API can answer is in the
OpenAPI document, whichever the language (MESSAGES_LANGUAGE)."""

from __future__ import annotations

import re
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from isp_gateway.kit.actions import Action
from isp_gateway.kit.messages import CATALOGUE, Language
from isp_gateway.mcp.tools import TOOLS
from tests.conftest import Gateway, Simulator, StartGateway, module_pair_fixtures

simulator, gateway = module_pair_fixtures()

# The texts the spec quotes (spec 4.3, 5.2, 7): the same in both languages.
QUOTED = {
    "Client not found",
    "Invalid document format",
    "Failed to retrieve clients",
    "Query parameter 'q' is required",
    "Unable to fetch client data",
    # Spec 4.4: "message in Spanish".
    "Identidad validada correctamente",
    "Los datos proporcionados no coinciden con los del cliente",
    "Debe proporcionar al menos 3 de los 4 campos para verificar la identidad",
    "Cliente no encontrado",
}
SNAKE = re.compile(r"\b[a-z]+_[a-z_]+\b")

SRC = Path(__file__).resolve().parents[2] / "src" / "isp_gateway"


def documented_actions(node: Any) -> Iterator[str]:
    """Every value an `action` property may take anywhere in the document (an enum or a
    const, in a response's schema or in a component)."""
    if isinstance(node, dict):
        action = node.get("properties", {}).get("action") if "properties" in node else None
        if isinstance(action, dict):
            yield from (v for v in action.get("enum", []) if isinstance(v, str))
            if isinstance(action.get("const"), str):
                yield action["const"]
        for value in node.values():
            yield from documented_actions(value)
    elif isinstance(node, list):
        for value in node:
            yield from documented_actions(value)


def _document_actions(document: dict[str, Any]) -> None:
    documented = set(documented_actions(document))
    missing = sorted(action.value for action in Action if action.value not in documented)
    assert missing == []
    # And the document names no action that is not a symbol.
    assert documented <= {action.value for action in Action}


def test_every_action_the_api_answers_is_in_the_document(gateway: Gateway) -> None:
    _document_actions(gateway.client.get("/openapi.json").json())


def _example_message(document: dict[str, Any], path: str, status: str, action: str) -> Any:
    media = document["paths"][path]["get"]["responses"][status]["content"]["application/json"]
    return media["examples"][action]["value"]["message"]


def test_in_english_too(
    gateway: Gateway, simulator: Simulator, start_gateway: StartGateway
) -> None:
    """MESSAGES_LANGUAGE=en: the same actions, the examples' messages in English, the
    spec's quoted texts as quoted in both."""
    english = start_gateway(simulator.url, MESSAGES_LANGUAGE="en")
    document = english.client.get("/openapi.json").json()
    _document_actions(document)
    spanish = gateway.client.get("/openapi.json").json()
    phone = "/api/v1/clients/by-phone/{phone}"
    assert _example_message(document, phone, "400", "invalid_phone") == "Invalid phone format"
    assert _example_message(spanish, phone, "400", "invalid_phone") == (
        "Formato de teléfono no válido"
    )
    for doc in (document, spanish):
        assert _example_message(doc, phone, "404", "client_not_found") == "Client not found"


def test_every_action_has_its_texts_in_both_languages() -> None:
    assert set(CATALOGUE) == set(Action)
    for action, texts in CATALOGUE.items():
        # Its sentence: what a bot says to the customer as is.
        assert "" in texts, action
        assert not texts[""].technical, action
        for variant, entry in texts.items():
            for language in Language:
                assert entry.get(language).strip(), (action, variant, language)
            fields = [{name for _, name, _, _ in string.Formatter().parse(text) if name}
                      for text in (entry.es, entry.en)]  # fmt: skip
            assert fields[0] == fields[1], (action, variant)
            if entry.pinned:
                assert entry.es == entry.en
            elif not entry.technical:
                assert entry.es != entry.en, (action, variant)


@pytest.mark.parametrize("language", list(Language))
def test_sentences_never_name_a_tool_or_a_field(language: Language) -> None:
    """Said to the customer as is (issue 28.7): no tool names, no API fields or paths."""
    tools = {tool.name for tool in TOOLS}
    for action, texts in CATALOGUE.items():
        for variant, entry in texts.items():
            if entry.technical:
                continue
            said = re.sub(r"\{\w+\}", "", entry.get(language))  # placeholders are no words
            assert not SNAKE.search(said), (action, variant, said)
            assert "/api" not in said and not any(tool in said for tool in tools)


def test_the_texts_the_spec_quotes_are_pinned() -> None:
    pinned = {entry.es for texts in CATALOGUE.values() for entry in texts.values() if entry.pinned}
    assert pinned == QUOTED


def test_no_message_is_written_outside_the_catalogue() -> None:
    """A message is a catalogue text: no error is raised, nor an answer built, with a
    literal sentence of its own."""
    raised = re.compile(
        r"\b(?:ServiceError|InvalidInput|NotFound|Conflict|Locked|TicketCreationFailed|"
        r"ZoneLimitReached|TicketAlreadyOpen|ZoneMismatch|VerificationRequired|"
        r"Upstream\w+)\(\s*f?\"|message=f?\""
    )
    for path in SRC.rglob("*.py"):
        if "simulator" in path.parts or "messages" in path.parts:
            continue
        found = raised.findall(path.read_text())
        assert not found, (str(path.relative_to(SRC)), found)


def test_no_action_is_written_as_a_string_in_the_code() -> None:
    """An action's string appears once in the code: in its enum member."""
    values = {action.value for action in Action} - {"error"}  # also the envelope's `type`
    for path in SRC.rglob("*.py"):
        if path.name == "actions.py" or "simulator" in path.parts:
            continue
        text = path.read_text()
        for value in values:
            assert f'"{value}"' not in text, (str(path.relative_to(SRC)), value)


def _example(document: dict[str, Any], path: str, method: str, status: str, action: str) -> Any:
    media = document["paths"][path][method]["responses"][status]["content"]["application/json"]
    return media["examples"][action]["value"]


def test_the_examples_are_the_answers_the_service_sends(gateway: Gateway) -> None:
    """The document's example of an answer is that answer as sent, message included: a
    wrong method, a search without `q`, a money route without its verification (the probe
    of the docs found the `error` examples all saying 'Error interno del servidor')."""
    document = gateway.client.get("/openapi.json").json()
    lookup = "/api/v1/clients/by-service-id/{service_id}"
    sent = gateway.client.delete("/api/v1/clients/by-service-id/101", headers=gateway.auth)
    assert sent.status_code == 405
    assert _example(document, lookup, "get", "405", "error") == sent.json()
    sent = gateway.get("/api/v1/clients/search")
    assert sent.status_code == 400
    assert _example(document, "/api/v1/clients/search", "get", "400", "error") == sent.json()
    listed = _example(document, "/api/v1/clients/", "get", "500", "error")
    assert listed["message"] == "Failed to retrieve clients"  # spec 4.3, as quoted
    promise = "/api/v1/clients/{service_id}/payment-promise"
    sent = gateway.post("/api/v1/clients/101/payment-promise", json={"until": "2099-01-01"})
    assert sent.status_code == 403
    refused = _example(document, promise, "post", "403", "verification_required")
    assert refused["message"] == sent.json()["message"]
    # Success answers that carry a sentence show one; a list of no plans is `data: null`.
    made = _example(document, promise, "post", "201", "payment_promise_created")
    assert made["message"] and made["message"].startswith("Listo: reactivamos su servicio")
    report = "/api/v1/clients/{service_id}/payment-reports"
    assert _example(document, report, "post", "202", "payment_report_received")["message"]
    none = _example(document, "/api/v1/internet-plans/", "get", "200", "internet_plan_not_found")
    assert none["data"] is None and none["message"] == "No hay planes de internet"
    poll = "/api/v1/ping/{task_id}/"
    sent = gateway.get("/api/v1/ping/no-such-task/")
    assert sent.status_code == 404
    assert _example(document, poll, "get", "404", "ping_failed") == sent.json()
    account = _example(
        document, "/api/v1/clients/{service_id}/account", "get", "502", "upstream_unavailable"
    )
    assert account["message"].startswith("No se puede confirmar el saldo")  # never "owes nothing"
    sent = gateway.get("/api/v1/tickets/99999999")
    assert sent.status_code == 404
    assert _example(document, "/api/v1/tickets/{ticket_id}", "get", "404", "ticket_not_found")[
        "message"
    ] == sent.json()["message"].replace("99999999", "1301")
    verify = "/api/v1/clients/{service_id}/verify"
    sent = gateway.post("/api/v1/clients/101/verify", json={"name": "Martha"})
    assert sent.status_code == 400
    assert _example(document, verify, "post", "400", "client_verification_failed") == sent.json()
    held = _example(document, "/api/v1/tickets", "post", "409", "outage_in_progress")
    assert held["data"]["outage_id"] in held["message"]  # the outage, as docs/outages.md says
    reused = _example(document, "/api/v1/tickets", "post", "422", "idempotency_key_reused")
    assert "Idempotency-Key" in reused["message"]
    # A body over the limit, and the money routes' final refusals, with what they carry.
    sent = gateway.post("/api/v1/clients/101/verify", content=b"x" * 70000)
    assert sent.status_code == 413
    assert _example(document, verify, "post", "413", "payload_too_large") == sent.json()
    for path, action, said in [
        (promise, "promise_not_allowed", "28 de noviembre"),
        (promise, "promise_already_active", "28 de noviembre"),
        (report, "payment_report_duplicate", "en revisión"),
        (report, "payment_report_not_allowed", "28 de noviembre"),
    ]:
        refused = _example(document, path, "post", "409", action)
        assert refused["data"] and said in refused["message"], action
