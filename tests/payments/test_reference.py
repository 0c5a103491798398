"""A report's `reference` is 1-64 printable characters (MONEY.md 2): a reference with an
invisible character (a zero-width space, a BOM, a no-break space, a word joiner) is refused
as a control character is, so it can neither be filed blank nor pass the duplicate guard as
another transfer; and the OpenAPI document's pattern says the same as the check."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any

import pytest

from isp_gateway.payments.ledger import reference_key
from isp_gateway.payments.schemas import MAX_REFERENCE, valid_reference
from tests.conftest import Pair, Simulator
from tests.payments.conftest import (
    DEBTORS,
    REPORT,
    audit_events,
    newer_invoice,
    oldest_invoice,
    png_file,
    report,
    verification_id,
)

PNG = ("r.png", png_file(), "image/png")
# Each invisible, each printable to no one: Python's str.isprintable() refuses them all.
INVISIBLE = [
    "\u200b",  # zero-width space (Cf)
    "\ufeff",  # byte order mark (Cf)
    "\u00a0",  # no-break space (Zs)
    "\u2060",  # word joiner (Cf)
    "\u200e",  # left-to-right mark (Cf)
    "\u00ad",  # soft hyphen (Cf)
    "\u2009",  # thin space (Zs)
    "\u3000",  # ideographic space (Zs)
    "\u2028",  # line separator (Zl)
    "\ue000",  # private use (Co)
    "\U000e0041",  # tag latin capital A (Cf), beyond the BMP
    "\u0378",  # unassigned (Cn)
]


@pytest.fixture(scope="module")
def pair(money_pair: Pair) -> Pair:
    return money_pair


def filed(sim: Simulator, service_id: int) -> list[str]:
    """The references the backend received for `service_id`'s invoices."""
    owned = {oldest_invoice(service_id), newer_invoice(service_id)}
    return [r.reference for r in sim.state.payment_reports if r.invoice_id in owned]


def refused_field(answer: Any) -> dict[str, Any]:
    assert answer.status_code == 422, answer.text
    body: dict[str, Any] = answer.json()
    assert body["action"] == "validation_error"
    assert [e["field"] for e in body["meta"]["errors"]] == ["body.reference"]
    return body


def test_an_invisible_character_is_refused_as_a_control_character_is(pair: Pair) -> None:
    sim, gw = pair
    sid = DEBTORS[10]
    vid = verification_id(gw, sid)
    control = refused_field(report(gw, sid, vid, PNG, reference="TRX-55\x0001"))
    for character in INVISIBLE:
        for reference in (f"TRX-55{character}01", f"TRX-5501{character}", character):
            answer = report(gw, sid, vid, PNG, reference=reference)
            # The same answer, word for word, as for a control character.
            assert refused_field(answer) == control, repr(reference)
    assert filed(sim, sid) == []
    # Counted in the audit as the other malformed reports are.
    failed = [e for e in audit_events(gw, "payment_report") if e["service_id"] == sid]
    assert {(e["outcome"], e["details"]["field"]) for e in failed} == {("failed", "reference")}
    assert sum(e["details"]["count"] for e in failed) == 1 + 3 * len(INVISIBLE)


def test_one_transfer_with_an_invisible_character_is_no_second_report(pair: Pair) -> None:
    sim, gw = pair
    sid = DEBTORS[11]
    vid = verification_id(gw, sid)
    assert report(gw, sid, vid, PNG, reference="TRX-5501").status_code == 202
    for reference in ("TRX-55\u200b01", "TRX-5501\ufeff", "TRX\u00a05501", "\u2060TRX-5501"):
        refused_field(report(gw, sid, vid, PNG, reference=reference))
    assert report(gw, sid, vid, PNG, reference="trx 5501").json()["action"] == (
        "payment_report_duplicate"
    )
    assert filed(sim, sid) == ["TRX-5501"]


def test_a_printable_reference_beyond_ascii_is_filed(pair: Pair) -> None:
    sim, gw = pair
    sid = DEBTORS[12]
    vid = verification_id(gw, sid)
    answer = report(gw, sid, vid, PNG, reference="  Nº ÑANDÚ-7 ")
    assert answer.status_code == 202, answer.text
    assert answer.json()["data"]["reference"] == "Nº ÑANDÚ-7"
    assert filed(sim, sid) == ["Nº ÑANDÚ-7"]


def test_the_documents_pattern_says_what_the_check_does(pair: Pair) -> None:
    _, gw = pair
    document = gw.client.get("/openapi.json").json()
    operation = document["paths"][REPORT.format("{service_id}")]["post"]
    schema = operation["requestBody"]["content"]["multipart/form-data"]["schema"]
    field = schema["properties"]["reference"]
    assert (field["minLength"], field["maxLength"]) == (1, MAX_REFERENCE)
    pattern = re.compile(field["pattern"])
    assert "printable" in field["description"]
    # Every assigned character of the Basic Multilingual Plane, alone and among others: the
    # pattern admits it exactly when the check does.
    for code in range(0x10000):
        character = chr(code)
        if unicodedata.category(character) == "Cn":
            continue
        for reference in (character, f"A{character}B"):
            documented = pattern.fullmatch(reference) is not None
            assert documented == valid_reference(reference), (hex(code), reference)
    # Beyond it (unassigned code points, a few format and private-use ones far up), the
    # description says it in words: the check refuses what the pattern cannot name.
    for character in ("\u0378", "\U000e0041", "\U000f0000"):
        assert not valid_reference(f"A{character}")
    assert not valid_reference("   ")
    assert not valid_reference("x" * (MAX_REFERENCE + 1))
    assert valid_reference("x" * MAX_REFERENCE)


def test_the_duplicate_guard_ignores_any_space_and_folds_ascii_as_before() -> None:
    # Marks already kept were folded as casefold() minus " .-_/": an ASCII reference keeps
    # its key.
    assert reference_key("TRX-55 01") == hashlib.sha256(b"trx5501").hexdigest()
    same = {reference_key(r) for r in ("TRX-5501", "trx 5501", "TRX\u00a05501", "TRX\u300055.01")}
    assert len(same) == 1
