"""POST /clients/{id}/payment-reports over loopback (MONEY.md 2): a real PNG and a real PDF
reach the backend byte for byte for staff review, the type is read from the content, every
field is checked before anything is sent, the duplicate guard, the idempotency, a backend
that fails, and the audit. One gateway for the module: each test its own customers."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.conftest import Pair, Simulator
from tests.payments.conftest import (
    CANCELLED,
    DEBTORS,
    OWES_NOTHING,
    REPORT,
    StartMoney,
    audit_events,
    day,
    newer_invoice,
    oldest_invoice,
    on_server,
    pdf_file,
    png_file,
    report,
    sim_reports,
    verification_id,
)

PNG = png_file()
PDF = pdf_file()
# A JPEG's and a WEBP's first bytes, then anything: the type is in the first bytes.
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01" + bytes(range(256)) * 4 + b"\xff\xd9"
WEBP = b"RIFF\x24\x08\x00\x00WEBPVP8 " + bytes(range(256)) * 8


@pytest.fixture(scope="module")
def pair(money_pair: Pair) -> Pair:
    return money_pair


def reports_of(sim: Simulator, service_id: int) -> list[Any]:
    owned = {oldest_invoice(service_id), newer_invoice(service_id)}
    return [r for r in sim_reports(sim) if r.invoice_id in owned]


def answered(answer: Any, status: int, action: str, kind: str = "error") -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    assert (body["ok"], body["type"], body["action"]) == (status < 300, kind, action), body
    return body


@pytest.mark.parametrize(
    ("index", "receipt", "media_type", "kind"),
    [(0, PNG, "image/png", "png"), (1, PDF, "application/pdf", "pdf")],
    ids=["png", "pdf"],
)
def test_a_receipt_reaches_staff_byte_for_byte(
    pair: Pair, index: int, receipt: bytes, media_type: str, kind: str
) -> None:
    sim, gw = pair
    sid = DEBTORS[index]
    vid = verification_id(gw, sid)
    answer = report(gw, sid, vid, (f"mi recibo.{kind}", receipt, media_type), reference="BNC 7781")
    body = answered(answer, 202, "payment_report_received", "success")
    assert body["data"] == {
        "service_id": sid,
        "invoice_id": oldest_invoice(sid),
        "reference": "BNC 7781",
        "status": "in_review",
    }
    assert "revisará" in body["message"] and "$40.000" in body["message"]
    [filed] = reports_of(sim, sid)
    assert filed.content == receipt  # the multipart the backend received, byte for byte
    assert (filed.content_type, filed.filename) == (media_type, f"comprobante.{kind}")
    assert (filed.method_id, filed.paid_on, filed.reference) == (9, day(-1), "BNC 7781")
    # Staff review it: the invoice is "En revisión", and still owed (no money registered).
    invoice = sim.state.get_invoice(oldest_invoice(sid))
    assert invoice is not None and invoice["estado"] == 4
    on_server(gw, gw.runtime.services.accounts.invoices.load_now())  # read the backend again
    account = gw.get(f"/api/v1/clients/{sid}/account").json()["data"]
    assert oldest_invoice(sid) in [i["invoice_id"] for i in account["pending_invoices"]]
    assert account["total_due"] == 52500.5


def test_the_type_is_read_from_the_content_never_the_name(pair: Pair) -> None:
    sim, gw = pair
    sid = DEBTORS[2]
    vid = verification_id(gw, sid)
    # Text named and declared as a PNG: refused, nothing sent.
    text = b"Pague 40000 el lunes, gracias.\n" * 3
    refused = report(gw, sid, vid, ("recibo.png", text, "image/png"))
    body = answered(refused, 415, "unsupported_receipt")
    assert "PDF" in body["message"]
    for fake in (b"GIF89a" + bytes(100), b"<html>%PDF-1.4</html>", b"\x89PN"):
        answered(report(gw, sid, vid, ("x.png", fake, "image/png")), 415, "unsupported_receipt")
    assert reports_of(sim, sid) == []
    # A JPEG and a WEBP under any name and type are what they are.
    answered(
        report(gw, sid, vid, ("photo.txt", JPEG, "text/plain"), reference="J-1"),
        202,
        "payment_report_received",
        "success",
    )
    answered(
        report(gw, sid, vid, ("scan", WEBP, "application/octet-stream"), reference="W-1"),
        202,
        "payment_report_received",
        "success",
    )
    kinds = [(r.content_type, r.filename, r.content) for r in reports_of(sim, sid)]
    assert kinds == [
        ("image/jpeg", "comprobante.jpeg", JPEG),
        ("image/webp", "comprobante.webp", WEBP),
    ]


def test_the_same_reference_twice_is_a_duplicate(pair: Pair) -> None:
    sim, gw = pair
    sid = DEBTORS[3]
    vid = verification_id(gw, sid)
    first = report(gw, sid, vid, ("r.pdf", PDF, "application/pdf"), reference="TRX-55 01")
    answered(first, 202, "payment_report_received", "success")
    # Again, and written another way (case, spaces, dashes): the same transfer.
    for reference in ("TRX-55 01", "trx5501", "Trx.55-01"):
        again = report(gw, sid, vid, ("r.png", PNG, "image/png"), reference=reference)
        body = answered(again, 409, "payment_report_duplicate", "info")
        assert body["data"]["invoice_id"] == oldest_invoice(sid)
        assert body["data"]["status"] == "in_review"
    assert len(reports_of(sim, sid)) == 1
    # Another reference (a second payment), and the same reference for another customer.
    answered(
        report(gw, sid, vid, ("r.png", PNG, "image/png"), reference="TRX-99"),
        202,
        "payment_report_received",
        "success",
    )
    other = DEBTORS[4]
    answered(
        report(
            gw,
            other,
            verification_id(gw, other),
            ("r.png", PNG, "image/png"),
            reference="TRX-55 01",
        ),
        202,
        "payment_report_received",
        "success",
    )
    assert len(reports_of(sim, sid)) == 2
    events = [e for e in audit_events(gw, "payment_report") if e["service_id"] == sid]
    # The duplicates are refusals: counted (CALLERS.md 6), one event a minute for the three.
    assert [e["outcome"] for e in (events[0], events[-1])] == ["received", "received"]
    duplicates = events[1:-1]
    assert {e["outcome"] for e in duplicates} == {"duplicate"}
    assert sum(e["details"]["count"] for e in duplicates) == 3


def test_the_rules_before_anything_is_sent(pair: Pair) -> None:
    sim, gw = pair
    nothing = report(
        gw, OWES_NOTHING, verification_id(gw, OWES_NOTHING), ("r.png", PNG, "image/png")
    )
    body = answered(nothing, 409, "payment_report_not_allowed", "info")
    assert body["data"] == {"reason": "nothing_owed"}
    sid = DEBTORS[5]
    vid = verification_id(gw, sid)
    png = ("r.png", PNG, "image/png")
    cases: list[tuple[dict[str, Any], int, str, str]] = [
        ({"invoice_id": oldest_invoice(DEBTORS[6])}, 422, "invoice_not_pending", ""),
        ({"invoice_id": oldest_invoice(OWES_NOTHING)}, 422, "invoice_not_pending", ""),
        ({"payment_method_id": 42}, 422, "validation_error", "body.payment_method_id"),
        ({"payment_method_id": "nueve"}, 422, "validation_error", "body.payment_method_id"),
        ({"paid_on": day(1)}, 422, "validation_error", "body.paid_on"),
        ({"paid_on": day(-61)}, 422, "validation_error", "body.paid_on"),
        ({"paid_on": "24/11/2026"}, 422, "validation_error", "body.paid_on"),
        ({"amount": "40.000"}, 422, "validation_error", "body.amount"),
        ({"amount": "40,000"}, 422, "validation_error", "body.amount"),
        ({"amount": "0"}, 422, "validation_error", "body.amount"),
        ({"amount": "-5"}, 422, "validation_error", "body.amount"),
        ({"amount": "1e3"}, 422, "validation_error", "body.amount"),
        # A trailing newline: the document's patterns end at the end of the text.
        ({"amount": "40000\n"}, 422, "validation_error", "body.amount"),
        ({"payment_method_id": "9\n"}, 422, "validation_error", "body.payment_method_id"),
        ({"paid_on": day(-1) + "\n"}, 422, "validation_error", "body.paid_on"),
        ({"reference": "x" * 65}, 422, "validation_error", "body.reference"),
        ({"reference": "   "}, 422, "validation_error", "body.reference"),
        ({"reference": "ab\x00cd"}, 422, "validation_error", "body.reference"),
        ({"reference": None}, 422, "validation_error", "body.reference"),
        ({"amount": None}, 422, "validation_error", "body.amount"),
        ({"comentario": "hola"}, 422, "validation_error", "body.comentario"),
    ]
    for fields, status, action, field in cases:
        answer = report(gw, sid, vid, png, **fields)
        body = answered(answer, status, action)
        if field:
            assert [e["field"] for e in body["meta"]["errors"]] == [field], fields
    # The form itself: no receipt, an empty one, not multipart at all.
    body = answered(report(gw, sid, vid, None), 422, "validation_error")
    assert body["meta"]["errors"][0]["field"] == "body.receipt"
    answered(report(gw, sid, vid, ("r.png", b"", "image/png")), 422, "validation_error")
    as_json = gw.post(
        REPORT.format(sid), json={"reference": "x"}, headers={"X-Verification-Id": vid}
    )
    body = answered(as_json, 422, "validation_error")
    assert body["meta"]["errors"][0]["field"] == "body"
    assert reports_of(sim, sid) == []


def test_a_cancelled_customer_may_still_report_a_payment(pair: Pair) -> None:
    sim, gw = pair
    answer = report(
        gw, CANCELLED, verification_id(gw, CANCELLED), ("r.pdf", PDF, "application/pdf")
    )
    answered(answer, 202, "payment_report_received", "success")
    assert len(reports_of(sim, CANCELLED)) == 1


def test_a_replay_with_the_same_key_files_one_report(pair: Pair) -> None:
    sim, gw = pair
    sid = DEBTORS[7]
    vid = verification_id(gw, sid)
    first = report(gw, sid, vid, ("r.png", PNG, "image/png"), key="report-key-1")
    again = report(gw, sid, vid, ("r.png", PNG, "image/png"), key="report-key-1")
    assert (first.status_code, again.status_code) == (202, 202)
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
    assert len(reports_of(sim, sid)) == 1
    # The same key with another receipt is another request.
    reused = report(gw, sid, vid, ("r.pdf", PDF, "application/pdf"), key="report-key-1")
    answered(reused, 422, "idempotency_key_reused")
    assert len(reports_of(sim, sid)) == 1


def test_the_reference_is_masked_and_no_receipt_is_logged(
    pair: Pair, caplog: pytest.LogCaptureFixture
) -> None:
    _sim, gw = pair
    sid = DEBTORS[8]
    vid = verification_id(gw, sid)
    marker = b"RECEIPT-MARKER-5521"
    receipt = PDF.replace(b"(Pago 40000)", b"(" + marker + b")")
    with caplog.at_level(logging.DEBUG):
        answer = report(gw, sid, vid, ("r.pdf", receipt, "application/pdf"), reference="ZX98765432")
    answered(answer, 202, "payment_report_received", "success")
    [event] = [e for e in audit_events(gw, "payment_report") if e["service_id"] == sid]
    assert event["outcome"] == "received"
    assert event["details"]["reference"] == "***32"
    assert event["details"]["receipt_type"] == "pdf"
    assert event["details"]["receipt_bytes"] == len(receipt)
    assert event["details"]["amount"] == 40000.0
    logged = caplog.text
    assert "ZX98765432" not in logged and marker.decode() not in logged
    assert "ZX98765432" not in str(audit_events(gw, "payment_report"))


def test_a_backend_that_fails(start_money: StartMoney) -> None:
    sim, gw = start_money()
    sid = DEBTORS[9]
    vid = verification_id(gw, sid)
    prefix = "/api/facturas/reportar-pago/"
    # Refused: nothing filed, and the reference free again.
    sim.state.faults.update({"force_403": True, "path_prefix": prefix})
    answer = report(gw, sid, vid, ("r.png", PNG, "image/png"))
    answered(answer, 502, "upstream_unauthorized")
    sim.state.faults.update({"reset": True, "error_rate": 1.0, "path_prefix": prefix})
    failed = answered(
        report(gw, sid, vid, ("r.png", PNG, "image/png")), 502, "payment_report_failed"
    )
    assert failed["meta"] == {"outcome": "unknown"}
    sim.state.faults.update({"reset": True})
    assert sim_reports(sim) == []
    answered(
        report(gw, sid, vid, ("r.png", PNG, "image/png")), 202, "payment_report_received", "success"
    )
    assert len(sim_reports(sim)) == 1
    # Filed, its answer lost: the reference is free again (docs/payments.md: a report staff
    # see twice is better than one never sent), so a repeat files it again.
    other = DEBTORS[10]
    other_vid = verification_id(gw, other)
    sim.state.faults.update({"empty_body": 1.0, "path_prefix": prefix})
    lost = answered(
        report(gw, other, other_vid, ("r.png", PNG, "image/png")), 502, "payment_report_failed"
    )
    assert lost["meta"] == {"outcome": "unknown"}
    assert "enviarlo de nuevo" in lost["message"]
    sim.state.faults.update({"reset": True})
    answered(
        report(gw, other, other_vid, ("r.png", PNG, "image/png")),
        202,
        "payment_report_received",
        "success",
    )
    outcomes = [e["outcome"] for e in audit_events(gw, "payment_report")]
    assert outcomes == ["failed", "failed", "received", "failed", "received"]


def test_at_most_five_reports_a_day_for_one_service(pair: Pair) -> None:
    sim, gw = pair
    sid = DEBTORS[11]
    vid = verification_id(gw, sid)
    png = ("r.png", PNG, "image/png")
    # One the backend refuses does not count: it never reached staff.
    sim.state.faults.update({"force_403": True, "path_prefix": "/api/facturas/reportar-pago/"})
    answered(report(gw, sid, vid, png, reference="DAY-0"), 502, "upstream_unauthorized")
    sim.state.faults.update({"reset": True})
    for number in range(1, 6):
        filed = report(gw, sid, vid, png, reference=f"DAY-{number}")
        answered(filed, 202, "payment_report_received", "success")
    sixth = report(gw, sid, vid, png, reference="DAY-6")
    body = answered(sixth, 409, "payment_report_not_allowed", "info")
    assert body["data"] == {"reason": "too_many_reports", "allowed_from": day(1)}
    assert "Podrá enviar otro desde el" in body["message"]
    assert len(reports_of(sim, sid)) == 5
    # Its reference was not used up: the same report tomorrow is no duplicate.
    assert on_server(gw, gw.runtime.services.payments.filer.marks.earlier(sid, "DAY-6")) is None
    failed = [e for e in audit_events(gw, "payment_report") if e["service_id"] == sid]
    assert [e["details"].get("reason") for e in failed if e["outcome"] == "failed"] == [
        "upstream_unauthorized",
        "too_many_reports",
    ]


def test_a_report_the_route_refuses_for_a_header_is_counted(pair: Pair) -> None:
    """Its only part FastAPI checks (the Idempotency-Key's length) is counted as the
    service's own 422s are: `failed`, reason `validation_error`, the field named."""
    sim, gw = pair
    sid = DEBTORS[12]
    vid = verification_id(gw, sid)
    answer = report(gw, sid, vid, ("r.png", PNG, "image/png"), key="k" * 256)
    body = answered(answer, 422, "validation_error")
    assert body["meta"]["errors"][0]["field"] == "header.Idempotency-Key"
    assert reports_of(sim, sid) == []
    [event] = [e for e in audit_events(gw, "payment_report") if e["service_id"] == sid]
    assert (event["outcome"], event["details"]["reason"], event["details"]["field"]) == (
        "failed",
        "validation_error",
        "header.Idempotency-Key",
    )
