"""Money's sentences come from the message catalogue (kit/messages/payments.py): Spanish by
default, English with MESSAGES_LANGUAGE=en, the date and the sum written as the language
writes them (issue 28.19 applied to MONEY.md's answers)."""

from __future__ import annotations

from datetime import date

from isp_gateway.kit import messages
from isp_gateway.kit.messages import Language
from tests.payments.conftest import (
    DEBTORS,
    OWES_NOTHING,
    TODAY,
    StartMoney,
    day,
    promise,
    verification_id,
)


def test_money_answers_in_english(start_money: StartMoney) -> None:
    _, gw = start_money(MESSAGES_LANGUAGE="en")
    sid = DEBTORS[-1]
    made = promise(gw, sid, verification_id(gw, sid), day(3))
    assert made.status_code == 201, made.text
    until = date.fromisoformat(day(3))
    assert made.json()["message"] == (
        f"Done: we reactivated your service until {until:%B} {until.day}"
        f"{'' if until.year == TODAY.year else f', {until.year}'}. Remember to pay $40,000 "
        "before that date."
    )
    nothing = promise(gw, OWES_NOTHING, verification_id(gw, OWES_NOTHING), day(2))
    assert nothing.status_code == 409, nothing.text
    assert nothing.json()["message"] == (
        "There are no pending invoices; no payment agreement is needed."
    )
    # A date out of the window: the sentence in English, the field's problem as always.
    late = promise(gw, DEBTORS[-2], verification_id(gw, DEBTORS[-2]), day(40))
    assert late.status_code == 422, late.text
    assert late.json()["message"].startswith("The payment agreement's date must be after today")


def test_dates_and_sums_as_each_language_writes_them() -> None:
    today = date(2025, 11, 20)
    messages.use_language(Language.ES)
    assert messages.day(date(2025, 11, 28), today) == "28 de noviembre"
    assert messages.day(date(2026, 1, 3), today) == "3 de enero de 2026"
    assert messages.amount(92500.5) == "$92.500,50"
    messages.use_language(Language.EN)
    try:
        assert messages.day(date(2025, 11, 28), today) == "November 28"
        assert messages.day(date(2026, 1, 3), today) == "January 3, 2026"
        assert messages.amount(92500.5) == "$92,500.50"
    finally:
        messages.use_language(Language.ES)
