"""Payment promises (`POST /api/promesa-pago/`) and payment reports
(`POST /api/facturas/reportar-pago/{id}/`), and the /_sim/payments control endpoint."""

from __future__ import annotations

from typing import Any

import pytest

from tests.simulator.conftest import SimServer

PROMISE = "/api/promesa-pago/"
# Every byte value, and a CRLF and a multipart-looking line inside: the receipt must arrive
# byte for byte.
RECEIPT = b"%PDF-1.4\r\n--boundary\r\n" + bytes(range(256)) * 4 + b"\r\n%%EOF"


def report_path(invoice_id: int) -> str:
    return f"/api/facturas/reportar-pago/{invoice_id}/"


def debtor(server: SimServer, estado: str = "Suspendido") -> tuple[dict[str, Any], int]:
    """A client in `estado` with a pending invoice, and that invoice's id."""
    for client in server.sim.dataset.clients:
        if client["estado"] != estado:
            continue
        for invoice in server.sim.dataset.invoices:
            if invoice["cliente"]["usuario"] == client["usuario"] and invoice["estado"] == 1:
                return client, int(invoice["id_factura"])
    raise AssertionError(f"the dataset has no {estado} client with a pending invoice")


def paid_invoice(server: SimServer) -> int:
    return next(int(i["id_factura"]) for i in server.sim.dataset.invoices if i["estado"] == 2)


def client_row(server: SimServer, service_id: int) -> dict[str, Any]:
    rows = server.client.get("/api/clientes/", params={"id_servicio": service_id}).json()
    row: dict[str, Any] = rows["results"][0]
    return row


def report_form(**changes: Any) -> dict[str, Any]:
    form = {"forma_pago": "8", "fecha_pago": "2026-11-20", "referencia": "BCO-778812"}
    form.update(changes)
    return {k: v for k, v in form.items() if v is not None}


# -- promises -------------------------------------------------------------------------------


def test_a_promise_reactivates_a_suspended_service_at_once(server: SimServer) -> None:
    client, invoice_id = debtor(server)
    body = {"id_factura": invoice_id, "fecha_limite": "2026-11-28", "accion": 1}
    response = server.client.post(PROMISE, json=body)
    assert response.status_code == 201, response.text
    assert response.json()["fecha_limite"] == "2026-11-28 00:00"
    assert response.json()["id_factura"] == invoice_id
    # The very next read of the client says so.
    assert client_row(server, client["id_servicio"])["estado"] == "Activo"
    (promise,) = server.sim.promises
    assert promise["id_factura"] == invoice_id
    assert promise["fecha_limite"] == "2026-11-28 00:00"
    assert promise["id_servicio"] == client["id_servicio"]
    # A promise registers no money: the invoice stays pending.
    assert server.sim.get_invoice(invoice_id)["estado"] == 1  # type: ignore[index]


def test_a_promise_without_action_leaves_the_service_suspended(server: SimServer) -> None:
    client, invoice_id = debtor(server)
    for body in (
        {"id_factura": invoice_id, "fecha_limite": "2026-11-28"},
        {"id_factura": invoice_id, "fecha_limite": "2026-11-28", "accion": 0},
    ):
        assert server.client.post(PROMISE, json=body).status_code == 201
    assert client_row(server, client["id_servicio"])["estado"] == "Suspendido"
    assert len(server.sim.promises) == 2


@pytest.mark.parametrize(
    ("fecha", "stored"),
    [("2026-11-28", "2026-11-28 00:00"), ("2026-11-28 17:30", "2026-11-28 17:30")],
)
def test_the_deadline_is_stored_with_a_time(server: SimServer, fecha: str, stored: str) -> None:
    _, invoice_id = debtor(server)
    response = server.client.post(PROMISE, json={"id_factura": invoice_id, "fecha_limite": fecha})
    assert response.status_code == 201
    assert server.sim.promises[0]["fecha_limite"] == stored


@pytest.mark.parametrize(
    "fecha", ["2026/11/28", "28/11/2026", "2026-02-30", "", "mañana", 20261128]
)
def test_a_deadline_without_dashes_is_400(server: SimServer, fecha: Any) -> None:
    client, invoice_id = debtor(server)
    body = {"id_factura": invoice_id, "fecha_limite": fecha, "accion": 1}
    response = server.client.post(PROMISE, json=body)
    assert response.status_code == 400
    assert list(response.json()) == ["fecha_limite"]
    assert server.sim.promises == [] and server.sim.promises_received == 0
    assert client_row(server, client["id_servicio"])["estado"] == "Suspendido"


def test_a_paid_invoice_is_400_and_nothing_changes(server: SimServer) -> None:
    invoice_id = paid_invoice(server)
    body = {"id_factura": invoice_id, "fecha_limite": "2026-11-28", "accion": 1}
    response = server.client.post(PROMISE, json=body)
    assert response.status_code == 400
    assert "pagada" in response.json()["id_factura"][0]
    assert server.sim.promises == []


def test_an_unknown_invoice_is_400_naming_the_field(server: SimServer) -> None:
    body = {"id_factura": 999_999, "fecha_limite": "2026-11-28", "accion": 1}
    response = server.client.post(PROMISE, json=body)
    assert response.status_code == 400
    assert response.json() == {
        "id_factura": ['Clave primaria "999999" inválida - objeto no existe.']
    }
    bad = server.client.post(PROMISE, json={**body, "id_factura": "x"})
    assert bad.status_code == 400 and "id_factura" in bad.json()
    assert server.sim.promises == []


def test_a_promise_without_an_invoice_is_accepted_and_acts_on_nobody(server: SimServer) -> None:
    """The serializer does not insist on `id_factura` (UPSTREAM.md): 201, a promise of no
    invoice, and no service reactivated."""
    suspended = [
        c["id_servicio"] for c in server.sim.dataset.clients if c["estado"] == "Suspendido"
    ]
    response = server.client.post(PROMISE, json={"fecha_limite": "2026-11-28", "accion": 1})
    assert response.status_code == 201
    assert response.json()["id_factura"] is None
    (promise,) = server.sim.promises
    assert promise["id_factura"] is None and promise["id_servicio"] is None
    still = [c["id_servicio"] for c in server.sim.dataset.clients if c["estado"] == "Suspendido"]
    assert still == suspended


def test_other_bad_fields_are_400(server: SimServer) -> None:
    _, invoice_id = debtor(server)
    assert server.client.post(PROMISE, json={"id_factura": invoice_id}).json() == {
        "fecha_limite": ["Este campo es requerido."]
    }
    body = {"id_factura": invoice_id, "fecha_limite": "2026-11-28", "accion": 7}
    assert list(server.client.post(PROMISE, json=body).json()) == ["accion"]
    assert server.client.post(PROMISE, content=b"{", headers=JSON_TYPE).status_code == 400
    assert server.sim.promises == []


JSON_TYPE = {"Content-Type": "application/json"}


def test_the_route_is_create_only_and_needs_the_key(server: SimServer) -> None:
    assert server.client.get(PROMISE).status_code == 405
    assert server.client.delete(PROMISE).status_code == 405
    with server.raw_client() as anonymous:
        body = {"fecha_limite": "2026-11-28"}
        assert anonymous.post(PROMISE, json=body).status_code == 403
    # Without the slash: a redirect, and a redirected POST would lose its body.
    assert server.client.post(PROMISE.rstrip("/"), json={}).status_code == 301
    assert server.sim.promises == []


def test_a_registered_payment_removes_its_promises(server: SimServer) -> None:
    (_, first), (_, second) = debtor(server), debtor(server, "Activo")
    for invoice_id in (first, second):
        body = {"id_factura": invoice_id, "fecha_limite": "2026-11-28", "accion": 1}
        assert server.client.post(PROMISE, json=body).status_code == 201
    with server.raw_client() as control:
        answer = control.put("/_sim/payments", json={"invoice_id": first, "estado": 2})
        assert answer.status_code == 200, answer.text
        held = answer.json()
    assert [p["id_factura"] for p in held["promises"]] == [second]
    assert held["promises_received"] == 2
    assert server.sim.get_invoice(first)["estado"] == 2  # type: ignore[index]
    stats = server.client.get(f"{server.url}/_sim/stats").json()
    assert (stats["promises"], stats["promises_received"]) == (1, 2)
    # The stats count the route like any other.
    assert stats["calls"]["POST /api/promesa-pago/"] == 2


def test_the_payments_control_validates_and_resets(server: SimServer) -> None:
    _, invoice_id = debtor(server)
    server.client.post(PROMISE, json={"id_factura": invoice_id, "fecha_limite": "2026-11-28"})
    with server.raw_client() as control:
        for bad in (
            {"invoice_id": invoice_id},
            {"invoice_id": 999_999, "estado": 2},
            {"invoice_id": invoice_id, "estado": 9},
            {"invoice_id": str(invoice_id), "estado": 2},
        ):
            assert control.put("/_sim/payments", json=bad).status_code == 400, bad
        assert server.sim.get_invoice(invoice_id)["estado"] == 1  # type: ignore[index]
        reset = control.put("/_sim/payments", json={"reset": True}).json()
        assert reset == {"promises": [], "promises_received": 0, "reports": []}


# -- payment reports ------------------------------------------------------------------------


def test_a_report_arrives_byte_for_byte_and_puts_the_invoice_in_review(server: SimServer) -> None:
    client, invoice_id = debtor(server)
    before = client_row(server, client["id_servicio"])
    response = server.client.post(
        report_path(invoice_id),
        data=report_form(),
        files={"comprobante_pago": ("recibo nequi.pdf", RECEIPT, "application/pdf")},
    )
    assert response.status_code == 200, response.text
    task_id = response.json()["task_id"]
    assert task_id
    (report,) = server.sim.payment_reports
    assert report.content == RECEIPT
    assert (report.filename, report.content_type) == ("recibo nequi.pdf", "application/pdf")
    assert (report.invoice_id, report.method_id) == (invoice_id, 8)
    assert (report.paid_on, report.reference, report.task_id) == (
        "2026-11-20",
        "BCO-778812",
        task_id,
    )
    # In review: 4 in the list, "En revisión" on the detail; out of the pending list.
    detail = server.client.get(f"/api/facturas/{invoice_id}/").json()
    assert detail["estado"] == "En revisión"
    in_review = server.client.get("/api/facturas/", params={"estado": 4, "limit": 1000}).json()
    assert [i["id_factura"] for i in in_review["results"]] == [invoice_id]
    pending = server.client.get("/api/facturas/", params={"estado": 1, "limit": 1000}).json()
    assert invoice_id not in [i["id_factura"] for i in pending["results"]]
    # No money moved and the service was not touched.
    assert client_row(server, client["id_servicio"]) == before
    # Its task reads as done.
    task = server.client.get(f"/api/tasks/{task_id}/").json()
    assert task["task"]["status"] == "SUCCESS"
    summary = server.client.get(f"{server.url}/_sim/payments").json()["reports"]
    assert summary[0]["size"] == len(RECEIPT) and summary[0]["id_factura"] == invoice_id
    assert "content" not in summary[0]


def test_a_report_of_an_invoice_in_review_and_a_promise_on_it_are_taken(
    server: SimServer,
) -> None:
    client, invoice_id = debtor(server)
    files = {"comprobante_pago": ("r.png", b"\x89PNG\r\n\x1a\n", "image/png")}
    for reference in ("A-1", "A-2"):
        answer = server.client.post(
            report_path(invoice_id), data=report_form(referencia=reference), files=files
        )
        assert answer.status_code == 200
    body = {"id_factura": invoice_id, "fecha_limite": "2026-11-28", "accion": 1}
    assert server.client.post(PROMISE, json=body).status_code == 201
    assert client_row(server, client["id_servicio"])["estado"] == "Activo"


@pytest.mark.parametrize(
    ("form", "field"),
    [
        (report_form(fecha_pago="2026/11/20"), "fecha_pago"),
        (report_form(fecha_pago="20/11/2026"), "fecha_pago"),
        (report_form(fecha_pago=None), "fecha_pago"),
        (report_form(forma_pago="99"), "forma_pago"),
        (report_form(forma_pago="efectivo"), "forma_pago"),
        (report_form(referencia="  "), "referencia"),
        (report_form(referencia=None), "referencia"),
    ],
)
def test_bad_report_fields_are_400_and_change_nothing(
    server: SimServer, form: dict[str, Any], field: str
) -> None:
    _, invoice_id = debtor(server)
    files = {"comprobante_pago": ("r.pdf", RECEIPT, "application/pdf")}
    response = server.client.post(report_path(invoice_id), data=form, files=files)
    assert response.status_code == 400
    assert list(response.json()) == [field]
    assert server.sim.payment_reports == []
    assert server.sim.get_invoice(invoice_id)["estado"] == 1  # type: ignore[index]


def test_a_report_needs_its_file_in_comprobante_pago(server: SimServer) -> None:
    _, invoice_id = debtor(server)
    missing = server.client.post(
        report_path(invoice_id),
        data=report_form(),
        files={"archivo": ("r.pdf", RECEIPT, "application/pdf")},
    )
    assert missing.status_code == 400
    assert missing.json() == {"comprobante_pago": ["No se envió ningún archivo."]}
    empty = server.client.post(
        report_path(invoice_id),
        data=report_form(),
        files={"comprobante_pago": ("r.pdf", b"", "application/pdf")},
    )
    assert empty.status_code == 400 and list(empty.json()) == ["comprobante_pago"]
    # Urlencoded parses but holds no file; JSON is not a media type the route takes.
    urlencoded = server.client.post(report_path(invoice_id), data=report_form())
    assert urlencoded.status_code == 400
    as_json = server.client.post(report_path(invoice_id), json=report_form())
    assert as_json.status_code == 415
    assert server.sim.payment_reports == []


def test_a_report_of_an_unknown_or_paid_invoice_is_refused(server: SimServer) -> None:
    files = {"comprobante_pago": ("r.pdf", RECEIPT, "application/pdf")}
    unknown = server.client.post(report_path(999_999), data=report_form(), files=files)
    assert unknown.status_code == 404 and unknown.json() == {"detail": "No encontrado."}
    paid = server.client.post(report_path(paid_invoice(server)), data=report_form(), files=files)
    assert paid.status_code == 400
    assert "pagada" in paid.json()["non_field_errors"][0]
    assert server.sim.payment_reports == []
    assert server.client.get(report_path(paid_invoice(server))).status_code == 405


def test_a_malformed_or_cut_multipart_body_files_nothing(server: SimServer) -> None:
    _, invoice_id = debtor(server)
    no_boundary = server.client.post(
        report_path(invoice_id),
        content=b"garbage",
        headers={"Content-Type": "multipart/form-data"},
    )
    assert no_boundary.status_code == 400
    assert no_boundary.json()["detail"].startswith("Multipart form parse error")
    garbage = server.client.post(
        report_path(invoice_id),
        content=b"--xyz\r\nnot a part header\r\n\r\n",
        headers={"Content-Type": "multipart/form-data; boundary=xyz"},
    )
    assert garbage.status_code == 400
    assert server.sim.payment_reports == []
    assert server.sim.get_invoice(invoice_id)["estado"] == 1  # type: ignore[index]
