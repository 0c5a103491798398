"""The demo's data (`isp-gateway demo`: `simulator --clients 2000 --seed 1 --answer-cases`):
suspended customers who owe, so a promise and a report can be tried from /docs, and a
technician for every record, so every active customer can get a ticket (issue 28)."""

from __future__ import annotations

from pathlib import Path

from isp_gateway.cli.demo import _demo_data_lines, gateway_overrides
from isp_gateway.settings import load_settings
from isp_gateway.simulator import DEMO_TECHNICIAN_ID, build_dataset, suspended_debtors
from tests.conftest import JWT_SECRET
from tests.simulator.conftest import StartSim

DEMO_CLIENTS, DEMO_SEED = 2000, 1


def test_the_demo_has_suspended_customers_who_owe_and_a_promise_works(
    start_sim: StartSim,
) -> None:
    server = start_sim(clients=DEMO_CLIENTS, seed=DEMO_SEED, answer_cases=True)
    debtors = suspended_debtors(server.sim.dataset)
    assert len(debtors) >= 10
    client, invoices = debtors[0]
    pending = server.client.get("/api/facturas/", params={"estado": 1, "limit": 1000}).json()
    owed = {row["id_factura"]: row["cliente"]["usuario"] for row in pending["results"]}
    assert owed[invoices[0]] == client["usuario"]
    body = {"id_factura": invoices[0], "fecha_limite": "2026-11-28", "accion": 1}
    assert server.client.post("/api/promesa-pago/", json=body).status_code == 201
    row = server.client.get("/api/clientes/", params={"id_servicio": client["id_servicio"]})
    assert row.json()["results"][0]["estado"] == "Activo"
    # Another one takes a report.
    _, other_invoices = debtors[1]
    report = server.client.post(
        f"/api/facturas/reportar-pago/{other_invoices[0]}/",
        data={"forma_pago": "7", "fecha_pago": "2026-11-20", "referencia": "R-1"},
        files={"comprobante_pago": ("r.jpg", b"\xff\xd8\xff\xe0JFIF", "image/jpeg")},
    )
    assert report.status_code == 200 and report.json()["task_id"]


def test_every_active_demo_customer_has_a_technician_the_backend_knows() -> None:
    dataset = build_dataset(DEMO_CLIENTS, DEMO_SEED)
    staff = {member["id"] for member in dataset.staff}
    assert DEMO_TECHNICIAN_ID in staff
    active = [c for c in dataset.clients if c["estado"] == "Activo"]
    without = [c for c in active if not c.get("tecnico")]
    # Some records name nobody: those tickets need the default.
    assert without
    for client in active:
        technician = (client.get("tecnico") or {}).get("id") or DEMO_TECHNICIAN_ID
        assert technician in staff
    # The staff does not depend on the size or the seed.
    for clients, seed in ((20, 2), (300, 7)):
        assert DEMO_TECHNICIAN_ID in {m["id"] for m in build_dataset(clients, seed).staff}


def test_the_demo_gateway_gets_the_default_technician(password_hash: str, tmp_path: Path) -> None:
    keys_file = tmp_path / "keys.json"
    overrides = gateway_overrides("k" * 24, "http://127.0.0.1:9", "demo", password_hash, keys_file)
    assert overrides["DEFAULT_TECHNICIAN_ID"] == str(DEMO_TECHNICIAN_ID)
    settings = load_settings(**{**overrides, "JWT_SECRET_KEY": JWT_SECRET})
    assert settings.DEFAULT_TECHNICIAN_ID == DEMO_TECHNICIAN_ID


def test_the_demo_names_a_debtor_of_its_own_data() -> None:
    lines = "\n".join(_demo_data_lines(300, DEMO_SEED))
    # The simulator serves the same data with its tickets: the debtors do not depend on them.
    debtors = suspended_debtors(build_dataset(300, DEMO_SEED))
    assert debtors == suspended_debtors(build_dataset(300, DEMO_SEED, tickets=0))
    client, invoices = debtors[0]
    assert f"service {client['id_servicio']}, invoice {invoices[0]}" in lines
    assert f"staff {DEMO_TECHNICIAN_ID}" in lines
