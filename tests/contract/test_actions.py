"""Every action is a symbol (kit/actions.py) with a sentence in the message catalogue
(kit/messages.py), and every action the API can answer is in the OpenAPI document."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from isp_gateway.kit.actions import Action
from isp_gateway.kit.messages import SENTENCES
from tests.conftest import Gateway, module_pair_fixtures

simulator, gateway = module_pair_fixtures()

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


def test_every_action_the_api_answers_is_in_the_document(gateway: Gateway) -> None:
    document = gateway.client.get("/openapi.json").json()
    documented = set(documented_actions(document))
    missing = sorted(action.value for action in Action if action.value not in documented)
    assert missing == []
    # And the document names no action that is not a symbol.
    assert documented <= {action.value for action in Action}


def test_every_action_has_a_sentence_in_the_catalogue() -> None:
    assert set(SENTENCES) == set(Action)
    for action, sentence in SENTENCES.items():
        assert sentence.strip(), action
        # Said to the customer as is: no tool names or API fields in it.
        assert not re.search(r"\b[a-z]+_[a-z_]+\b", sentence), (action, sentence)


def test_no_action_is_written_as_a_string_in_the_code() -> None:
    """An action's string appears once in the code: in its enum member."""
    values = {action.value for action in Action} - {"error"}  # also the envelope's `type`
    for path in SRC.rglob("*.py"):
        if path.name == "actions.py" or "simulator" in path.parts:
            continue
        text = path.read_text()
        for value in values:
            assert f'"{value}"' not in text, (str(path.relative_to(SRC)), value)
