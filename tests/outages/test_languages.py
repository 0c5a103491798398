"""The outage sentences (the webhooks' notices, current_outages, a held ticket) come from the
message catalogue (kit/messages/outages.py): Spanish by default, English with
MESSAGES_LANGUAGE=en."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.kit.messages import Language
from isp_gateway.mcp.tools.outages import outages_sentence
from isp_gateway.outages.events import ended_sentence, started_sentence

OUTAGE = {"description": "Corte de fibra en la troncal."}


@pytest.fixture
def english() -> Iterator[None]:
    messages.use_language(Language.EN)
    try:
        yield
    finally:
        messages.use_language(Language.ES)


def test_in_spanish_by_default() -> None:
    messages.use_language(Language.ES)
    assert started_sentence(OUTAGE) == (
        "Hay una falla general en su sector: Corte de fibra en la troncal. Estamos trabajando "
        "en ello."
    )
    assert ended_sentence().startswith("Ya se solucionó la falla general en su sector.")
    assert outages_sentence([]) == "No hay fallas generales en este momento."
    assert outages_sentence([OUTAGE, OUTAGE]).startswith("Hay 2 fallas generales en curso")


@pytest.mark.usefixtures("english")
def test_in_english() -> None:
    assert started_sentence(OUTAGE) == (
        "There is a general outage in your area: Corte de fibra en la troncal. We are working "
        "on it."
    )
    assert started_sentence({}) == "There is a general outage in your area. We are working on it."
    assert ended_sentence().startswith("The general outage in your area is solved.")
    assert outages_sentence([]) == "There are no general outages right now."
    assert outages_sentence([OUTAGE]) == (
        "There is a general outage in progress: Corte de fibra en la troncal. We are working on it."
    )
    assert messages.say(Action.OUTAGE_IN_PROGRESS).startswith("There is a general outage")
