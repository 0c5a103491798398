"""upstream/payments.py's writes against the real simulator over loopback (and a scripted
backend for what the simulator never answers): a payment promise and a payment report, their
typed errors, "outcome unknown", the streamed receipt and the rate budget."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import date
from typing import Any

import pytest
from starlette.applications import Starlette

from isp_gateway.kit.errors import UpstreamRateLimited, UpstreamRejected, UpstreamUnauthorized
from isp_gateway.simulator import suspended_debtors
from isp_gateway.upstream import payments
from isp_gateway.upstream.gateway import UpstreamUnreached
from isp_gateway.upstream.payments import (
    InvoiceAlreadyPaid,
    InvoiceUnknown,
    PaymentOutcomeUnknown,
    PaymentRejected,
    PromiseMade,
    ReceiptSizeMismatch,
)
from tests.conftest import Simulator, StartSimulator
from tests.support import run_server
from tests.upstream.conftest import Connect, Recorder

pytestmark = pytest.mark.anyio

UNTIL = date(2026, 11, 28)
PAID_ON = date(2026, 11, 20)
# Every byte value, CRLFs and a line that looks like a multipart boundary.
RECEIPT = b"%PDF-1.7\r\n--" + bytes(range(256)) * 64 + b"\r\n--\r\n%%EOF\r\n"


def debtor(sim: Simulator, nth: int = 0) -> tuple[dict[str, Any], int]:
    """A suspended client with a pending invoice (the dataset's own row, so a change shows),
    and that invoice's id."""
    client, invoices = suspended_debtors(sim.state.dataset)[nth]
    return client, invoices[0]


def paid_invoice(sim: Simulator) -> int:
    return next(int(i["id_factura"]) for i in sim.state.dataset.invoices if i["estado"] == 2)


def calls(sim: Simulator, key: str) -> int:
    return int(sim.state.calls[key])


async def chunks(data: bytes, size: int = 7000) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


# -- promises -------------------------------------------------------------------------------


async def test_a_promise_is_made_once_and_reconnects(
    simulator: Simulator, connect: Connect
) -> None:
    upstream = connect(simulator.url)
    client, invoice_id = debtor(simulator)
    made = await payments.create_promise(upstream.gateway, invoice_id, UNTIL)
    assert made == PromiseMade(invoice_id, UNTIL)
    (promise,) = simulator.state.promises
    assert (promise["id_factura"], promise["fecha_limite"], promise["accion"]) == (
        invoice_id,
        "2026-11-28 00:00",
        1,
    )
    assert client["estado"] == "Activo"
    assert calls(simulator, "POST /api/promesa-pago/") == 1
    # An interactive call of the budget, like a ticket or a ping.
    assert await upstream.spent() == await upstream.spent(interactive=False) == 1


async def test_a_promise_without_reconnection_sends_action_0(
    simulator: Simulator, connect: Connect
) -> None:
    client, invoice_id = debtor(simulator)
    await payments.create_promise(
        connect(simulator.url).gateway, invoice_id, UNTIL, reconnect=False
    )
    assert simulator.state.promises[0]["accion"] == 0 and client["estado"] == "Suspendido"


async def test_a_paid_or_unknown_invoice_has_its_own_error(
    simulator: Simulator, connect: Connect
) -> None:
    gateway = connect(simulator.url).gateway
    with pytest.raises(InvoiceAlreadyPaid) as paid:
        await payments.create_promise(gateway, paid_invoice(simulator), UNTIL)
    assert isinstance(paid.value, PaymentRejected) and isinstance(paid.value, UpstreamRejected)
    assert paid.value.upstream_status == 400 and paid.value.of_request
    assert paid.value.fields[0][0] == "invoice_id"
    with pytest.raises(InvoiceUnknown):
        await payments.create_promise(gateway, 999_999, UNTIL)
    assert simulator.state.promises == []


@pytest.mark.parametrize("invoice_id", [0, -3, True])
async def test_a_promise_is_never_sent_without_an_invoice(
    start_simulator: StartSimulator, connect: Connect, invoice_id: Any
) -> None:
    sim = start_simulator(clients=20)
    with pytest.raises(ValueError, match="invoice_id"):
        await payments.create_promise(connect(sim.url).gateway, invoice_id, UNTIL)
    assert sim.state.stats()["total"] == 0


# Faults answered before the route (nothing done) and after it (`empty_body`: done): the
# caller cannot tell them apart, so both are "outcome unknown".
UNKNOWN_OUTCOMES = [
    pytest.param({"hang_rate": 1.0}, False, id="timeout"),
    pytest.param({"error_rate": 1.0}, False, id="5xx"),
    pytest.param({"garbage": 1.0}, False, id="garbage"),
    pytest.param({"unreadable_write": True}, False, id="html"),
    pytest.param({"empty_body": 1.0}, True, id="empty-body-after-the-write"),
]


# Each write as the upstream names it: the path its faults apply to, the call as `calls`
# counts it, and the simulator's list of what it made.
WRITES = {
    "promise": ("/api/promesa-pago/", "POST /api/promesa-pago/", "promises"),
    "report": (
        "/api/facturas/reportar-pago/",
        "POST /api/facturas/reportar-pago/{id}/",
        "payment_reports",
    ),
}


async def write(kind: str, gateway: Any, invoice_id: int) -> None:
    if kind == "promise":
        await payments.create_promise(gateway, invoice_id, UNTIL)
    else:
        await payments.report_payment(
            gateway, invoice_id, 7, PAID_ON, "R", chunks(RECEIPT), "r.pdf", "application/pdf"
        )


@pytest.mark.parametrize("kind", list(WRITES))
@pytest.mark.parametrize(("fault", "done"), UNKNOWN_OUTCOMES)
async def test_no_readable_answer_to_a_write_is_outcome_unknown(
    simulator: Simulator,
    connect: Connect,
    fault: dict[str, Any],
    done: bool,
    kind: str,
) -> None:
    prefix, call, made = WRITES[kind]
    simulator.state.faults.update({**fault, "path_prefix": prefix})
    _, invoice_id = debtor(simulator)
    # Only the hang is meant to time out (soon); the other answers must arrive, in a margin a
    # stalled test process keeps (the empty body's write must be done).
    timeout = 0.5 if "hang_rate" in fault else 2.0
    gateway = connect(simulator.url, UPSTREAM_TIMEOUT_SECONDS=timeout).gateway
    with pytest.raises(PaymentOutcomeUnknown) as unknown:
        await write(kind, gateway, invoice_id)
    assert (unknown.value.operation, unknown.value.invoice_id) == (kind, invoice_id)
    assert unknown.value.status_code == 502
    assert len(getattr(simulator.state, made)) == (1 if done else 0)
    assert calls(simulator, call) == 1  # never repeated


async def test_refusals_before_the_write_keep_their_errors(
    simulator: Simulator, connect: Connect
) -> None:
    gateway = connect(simulator.url).gateway
    _, invoice_id = debtor(simulator)
    simulator.state.faults.update({"force_403": True})
    with pytest.raises(UpstreamUnauthorized):
        await payments.create_promise(gateway, invoice_id, UNTIL)
    simulator.state.faults.update({"reset": True, "force_429": True, "retry_after": 7})
    with pytest.raises(UpstreamRateLimited) as limited:
        await payments.create_promise(gateway, invoice_id, UNTIL)
    assert limited.value.retry_after == 7
    assert simulator.state.promises == []


async def test_a_refused_connection_is_known_to_have_done_nothing(
    connect: Connect,
) -> None:
    with run_server(Starlette()) as url:
        pass  # the port is closed again: connections are refused
    gateway = connect(url).gateway
    with pytest.raises(UpstreamUnreached):
        await payments.create_promise(gateway, 5001, UNTIL)
    with pytest.raises(UpstreamUnreached):
        await payments.report_payment(
            gateway, 5001, 7, PAID_ON, "R", RECEIPT, "r.pdf", "application/pdf"
        )


async def test_the_writes_spend_the_interactive_budget(
    simulator: Simulator, connect: Connect
) -> None:
    upstream = connect(simulator.url, UPSTREAM_RATE_PER_MINUTE=2, UPSTREAM_RATE_PER_HOUR=100)
    (_, first), (_, second) = debtor(simulator), debtor(simulator, 1)
    await payments.create_promise(upstream.gateway, first, UNTIL)
    await payments.report_payment(
        upstream.gateway, second, 7, PAID_ON, "R-1", RECEIPT, "r.pdf", "application/pdf"
    )
    assert await upstream.spent() == 2
    # The minute's budget is gone: the next write is refused here, never sent.
    with pytest.raises(UpstreamRateLimited):
        await payments.create_promise(upstream.gateway, second, UNTIL)
    assert simulator.state.stats()["total"] == 2


# -- reports --------------------------------------------------------------------------------


async def test_a_report_sends_the_receipt_byte_for_byte(
    simulator: Simulator, connect: Connect
) -> None:
    upstream = connect(simulator.url)
    client, invoice_id = debtor(simulator)
    task_id = await payments.report_payment(
        upstream.gateway,
        invoice_id,
        8,
        PAID_ON,
        "BCO 7788-12 ñ",
        RECEIPT,
        "recibo.pdf",
        "application/pdf",
    )
    (report,) = simulator.state.payment_reports
    assert report.task_id == task_id
    assert report.content == RECEIPT
    assert (report.filename, report.content_type) == ("recibo.pdf", "application/pdf")
    assert (report.method_id, report.paid_on, report.reference) == (
        8,
        "2026-11-20",
        "BCO 7788-12 ñ",
    )
    assert simulator.state.get_invoice(invoice_id)["estado"] == 4
    assert client["estado"] == "Suspendido"  # a report moves no money and reconnects nobody
    assert await upstream.spent() == 1


@pytest.mark.parametrize("sized", [True, False], ids=["content-length", "chunked"])
async def test_a_streamed_receipt_arrives_whole(
    simulator: Simulator, connect: Connect, sized: bool
) -> None:
    _, invoice_id = debtor(simulator)
    big = RECEIPT * 20  # about 330 KB in 48 chunks
    await payments.report_payment(
        connect(simulator.url).gateway,
        invoice_id,
        7,
        PAID_ON,
        "R-9",
        chunks(big),
        "foto.jpg",
        "image/jpeg",
        size=len(big) if sized else None,
    )
    assert simulator.state.payment_reports[0].content == big


async def test_a_sized_stream_has_a_content_length_and_an_unsized_one_is_chunked(
    recorder: tuple[Recorder, str], connect: Connect
) -> None:
    script, url = recorder
    gateway = connect(url).gateway
    for size in (len(RECEIPT), None):
        await payments.report_payment(
            gateway, 5001, 7, PAID_ON, "R", chunks(RECEIPT), "r.pdf", "application/pdf", size=size
        )
    (sized_headers, sized_body), (chunked_headers, _) = script.requests
    assert int(sized_headers["content-length"]) == len(sized_body)
    assert "transfer-encoding" not in sized_headers
    assert chunked_headers["transfer-encoding"] == "chunked"
    assert "content-length" not in chunked_headers
    for headers, body in script.requests:
        assert headers["content-type"].startswith("multipart/form-data; boundary=")
        assert RECEIPT in body
        assert headers["authorization"].startswith("Api-Key ")


async def test_a_receipt_that_is_not_its_announced_size_is_cut_short(
    simulator: Simulator, connect: Connect
) -> None:
    gateway = connect(simulator.url).gateway
    _, invoice_id = debtor(simulator)
    for size in (len(RECEIPT) - 1, len(RECEIPT) + 1):
        with pytest.raises(ReceiptSizeMismatch):
            await payments.report_payment(
                gateway, invoice_id, 7, PAID_ON, "R", chunks(RECEIPT), "r.pdf", "x/y", size=size
            )
    await asyncio.sleep(0.2)  # the simulator saw two bodies cut short
    assert simulator.state.payment_reports == []
    assert simulator.state.get_invoice(invoice_id)["estado"] == 1


async def test_file_names_and_media_types_are_sent_safely(
    recorder: tuple[Recorder, str], connect: Connect
) -> None:
    script, url = recorder
    await payments.report_payment(
        connect(url).gateway,
        5001,
        7,
        PAID_ON,
        "R",
        b"x",
        '..\\..\\mis "fotos"/recibo ñandú.PDF',
        "text/html\r\nX-Evil: 1",
    )
    ((_, body),) = script.requests
    assert b'filename="recibo nandu.PDF"' in body
    assert b"Content-Type: application/octet-stream\r\n" in body
    assert b"X-Evil" not in body
    assert payments.safe_filename(None) == payments.safe_filename("///") == "comprobante"


async def test_a_report_of_a_paid_or_unknown_invoice_or_bad_fields(
    simulator: Simulator, connect: Connect
) -> None:
    gateway = connect(simulator.url).gateway

    async def report(invoice_id: int, method_id: int = 7) -> str:
        return await payments.report_payment(
            gateway, invoice_id, method_id, PAID_ON, "R", RECEIPT, "r.pdf", "application/pdf"
        )

    with pytest.raises(InvoiceAlreadyPaid):
        await report(paid_invoice(simulator))
    with pytest.raises(InvoiceUnknown) as unknown:
        await report(999_999)
    assert unknown.value.upstream_status == 404
    _, invoice_id = debtor(simulator)
    with pytest.raises(PaymentRejected) as rejected:
        await report(invoice_id, method_id=99)
    assert type(rejected.value) is PaymentRejected and rejected.value.of_request
    assert [name for name, _ in rejected.value.fields] == ["payment_method_id"]
    assert simulator.state.payment_reports == []


@pytest.mark.parametrize(
    "answer",
    [
        (200, b'{"status": "ok"}'),
        (200, b'{"task_id": ""}'),
        (200, b"[]"),
        (201, b""),
        (200, b"<html>OK</html>"),
    ],
)
async def test_a_report_answer_without_a_task_id_is_outcome_unknown(
    recorder: tuple[Recorder, str], connect: Connect, answer: tuple[int, bytes]
) -> None:
    script, url = recorder
    script.answer = answer
    with pytest.raises(PaymentOutcomeUnknown):
        await payments.report_payment(
            connect(url).gateway, 5001, 7, PAID_ON, "R", b"x", "r.pdf", "application/pdf"
        )


async def test_a_promise_answer_naming_another_invoice_is_outcome_unknown(
    recorder: tuple[Recorder, str], connect: Connect
) -> None:
    script, url = recorder
    gateway = connect(url).gateway
    script.answer = (201, b'{"id_factura": 5002, "fecha_limite": "2026-11-28 00:00"}')
    with pytest.raises(PaymentOutcomeUnknown):
        await payments.create_promise(gateway, 5001, UNTIL)
    script.answer = (201, b'{"id_factura": "5001"}')
    assert await payments.create_promise(gateway, 5001, UNTIL) == PromiseMade(5001, UNTIL)
    # What was sent: the Spanish names, dashes, accion 1.
    _, body = script.requests[-1]
    assert body == b'{"id_factura":5001,"fecha_limite":"2026-11-28","accion":1}'


async def test_an_unexpected_refusal_is_a_plain_payment_rejection(
    recorder: tuple[Recorder, str], connect: Connect
) -> None:
    script, url = recorder
    script.answer = (400, b'{"detail": "Servicio sin router asignado."}')
    with pytest.raises(PaymentRejected) as rejected:
        await payments.create_promise(connect(url).gateway, 5001, UNTIL)
    assert type(rejected.value) is PaymentRejected
    assert rejected.value.fields == [("request", "Servicio sin router asignado.")]
    assert not isinstance(rejected.value, PaymentOutcomeUnknown)
    script.answer = (400, b'{"non_field_errors": ["La factura ya fue PAGADA."]}')
    with pytest.raises(InvoiceAlreadyPaid):
        await payments.create_promise(connect(url).gateway, 5001, UNTIL)
