"""The simulator's invoices and payment methods, as UPSTREAM.md "More of the same API" says."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import httpx
import pytest

from isp_gateway.simulator import build_dataset, dump_dataset, load_dataset
from isp_gateway.simulator.dataset import INVOICE_STATES, DataFileError
from tests.conftest import API_KEY, Simulator, StartGateway, StartSimulator

AUTH = {"Authorization": f"Api-Key {API_KEY}"}
DOCS = Path(__file__).resolve().parents[2] / "docs"


def _get(sim: Simulator, path: str, **params: object) -> httpx.Response:
    return httpx.get(sim.url + path, params=params, headers=AUTH, timeout=10)


def test_invoice_list_filters_by_numeric_estado_only(
    start_simulator: StartSimulator,
) -> None:
    sim = start_simulator(clients=300)
    everything = _get(sim, "/api/facturas/", limit=5000).json()
    pending = _get(sim, "/api/facturas/", estado=1, limit=5000).json()
    assert 0 < pending["count"] < everything["count"]
    assert {row["estado"] for row in pending["results"]} == {1}
    # A text estado matches nothing; a client filter is ignored (the whole list comes back).
    assert _get(sim, "/api/facturas/", estado="Pendiente de Pago").json()["count"] == 0
    first_user = pending["results"][0]["cliente"]["usuario"]
    ignored = _get(sim, "/api/facturas/", estado=1, usuario=first_user, cliente=first_user)
    assert ignored.json()["count"] == pending["count"]
    assert _get(sim, "/api/facturas/").status_code == 200
    assert httpx.get(sim.url + "/api/facturas/", timeout=10).status_code == 403


def test_invoice_rows_mix_number_and_string_totals(
    start_simulator: StartSimulator,
) -> None:
    sim = start_simulator(clients=300)
    rows = _get(sim, "/api/facturas/", estado=1, limit=5000).json()["results"]
    kinds = {type(row["total"]) for row in rows}
    assert kinds == {float, str}
    row = rows[0]
    assert set(row) >= {"id_factura", "cliente", "total", "fecha_emision", "fecha_vencimiento"}
    assert set(row["cliente"]) == {"usuario", "nombre"}
    date.fromisoformat(row["fecha_vencimiento"])
    sim.state.variants.update({"money": "number"})
    rows = _get(sim, "/api/facturas/", estado=1, limit=5000).json()["results"]
    assert {type(row["total"]) for row in rows} == {float}


def test_invoice_detail_has_a_text_estado(start_simulator: StartSimulator) -> None:
    sim = start_simulator(clients=100)
    invoice = sim.state.dataset.invoices[0]
    detail = _get(sim, f"/api/facturas/{invoice['id_factura']}/").json()
    assert detail["estado"] == INVOICE_STATES[invoice["estado"]]
    assert detail["estado"] in ("Pendiente de Pago", "Pagada")
    sim.state.set_invoice_state(invoice["id_factura"], 5)
    detail = _get(sim, f"/api/facturas/{invoice['id_factura']}/").json()
    assert detail["estado"] == "Se Transfirio"
    missing = _get(sim, "/api/facturas/1/")
    assert (missing.status_code, missing.json()) == (404, {"detail": "No encontrado."})


def test_payment_methods_are_paginated(start_simulator: StartSimulator) -> None:
    sim = start_simulator(clients=50)
    body = _get(sim, "/api/formas-de-pago/").json()
    assert body["count"] == len(body["results"]) == 4
    assert body["results"][0] == {"id": 7, "nombre": "efectivo"}


def test_generated_accounts_for_the_demo() -> None:
    dataset = build_dataset(400, 1)
    by_user: dict[str, list[dict[str, object]]] = {}
    for invoice in dataset.invoices:
        if invoice["estado"] == 1:
            by_user.setdefault(invoice["cliente"]["usuario"], []).append(invoice)
    today = date.today().isoformat()
    suspended_overdue = [
        c
        for c in dataset.clients
        if c["estado"] == "Suspendido"
        and any(str(i["fecha_vencimiento"]) < today for i in by_user.get(c["usuario"], []))
    ]
    assert suspended_overdue
    assert max(len(v) for v in by_user.values()) >= 14  # more than a default page of ten
    paid = [i for i in dataset.invoices if i["estado"] == 2]
    assert paid and all(i["cliente"]["usuario"] not in by_user for i in paid[:5])
    # Every row holds the private fields a real one does.
    private = ("password_cpe", "password_servicio", "password_router_wifi")
    assert all(
        all(c.get(k) for k in (*private, "password_ssid_router_wifi")) for c in dataset.clients
    )
    assert all("," in c["coordenadas"] and c["mac_cpe"] for c in dataset.clients)


def test_private_fields_did_not_change_the_rest_of_the_data() -> None:
    # Generated from a stream of their own: the rows of a seed are what they were before
    # (values read from the generator as it was before the private fields were added).
    clients = build_dataset(300, 7).clients
    assert (clients[0]["cedula"], clients[-1]["cedula"]) == ("8392492", "944283854")


def test_a_fault_can_hit_later_pages_only(start_simulator: StartSimulator) -> None:
    sim = start_simulator(clients=50)
    sim.state.faults.update(
        {
            "error_rate": 1.0,
            "scopes": {"error_rate": {"path_prefix": "/api/facturas/", "min_offset": 10}},
        }
    )
    assert _get(sim, "/api/facturas/", limit=10, offset=0).status_code == 200
    assert _get(sim, "/api/facturas/", limit=10, offset=10).status_code == 500
    assert _get(sim, "/api/clientes/", limit=10, offset=10).status_code == 200
    assert sim.state.faults.as_dict()["scopes"]["error_rate"]["min_offset"] == 10


def test_data_file_round_trip_and_invoice_checks(tmp_path: Path) -> None:
    dataset = build_dataset(120, 2)
    path = tmp_path / "data.json"
    dump_dataset(dataset, path)
    loaded = load_dataset(path)
    assert loaded.invoices == dataset.invoices
    assert loaded.payment_methods == dataset.payment_methods
    # Labels are accepted for estado; an invoice without an integer id names its entry.
    client = dataset.clients[0]
    labelled = {"id_factura": 1, "cliente": {"usuario": client["usuario"]}, "estado": "Pagada"}
    path.write_text(json.dumps({"clients": [client], "invoices": [labelled]}), "utf-8")
    assert load_dataset(path).invoices[0]["estado"] == 2
    assert len(load_dataset(path).payment_methods) == 4  # the default ones
    path.write_text(json.dumps({"clients": [client], "invoices": [{"total": "1.00"}]}), "utf-8")
    with pytest.raises(DataFileError, match=r"invoices\[0\]"):
        load_dataset(path)


def test_the_data_file_of_docs_simulator_gives_its_client_an_account(
    tmp_path: Path, start_simulator: StartSimulator, start_gateway: StartGateway
) -> None:
    """docs/simulator.md's example data file, loaded as it is: its invoice is its client's
    (invoices are matched by `usuario`; a client row without one has no account, 502)."""
    page = (DOCS / "simulator.md").read_text()
    example = page.split("```json\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "data.json"
    path.write_text(example)
    sim = start_simulator(data_file=path)
    gateway = start_gateway(sim.url)
    answer = gateway.get("/api/v1/clients/100/account")
    assert answer.status_code == 200, answer.text
    account = answer.json()["data"]
    assert [i["invoice_id"] for i in account["pending_invoices"]] == [5001]
    assert account["total_due"] == 40000.0
