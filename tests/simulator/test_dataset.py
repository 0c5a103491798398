"""Generated data: deterministic, realistic, fast; and the JSON data file format."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from isp_gateway.simulator import build_dataset, dump_dataset, load_dataset
from isp_gateway.simulator.dataset import DataFileError, load_subjects


def test_same_seed_same_data_and_other_seed_differs() -> None:
    first, again, other = build_dataset(300, 7), build_dataset(300, 7), build_dataset(300, 8)
    assert first.clients == again.clients
    assert first.tickets == again.tickets
    assert first.zones == again.zones
    assert [c["cedula"] for c in first.clients] != [c["cedula"] for c in other.clients]


def test_twenty_thousand_clients_have_distinct_ids_and_documents() -> None:
    # How fast this runs is the benchmark's business (bench/indexing.py), not a test's.
    dataset = build_dataset(20_000, 3)
    assert len(dataset.clients) == 20_000
    assert len({c["id_servicio"] for c in dataset.clients}) == 20_000
    assert len({c["cedula"] for c in dataset.clients}) == 20_000


def test_client_rows_look_like_the_upstream() -> None:
    clients = build_dataset(2000, 1).clients
    ids = [c["id_servicio"] for c in clients]
    assert len(set(ids)) == len(ids) and ids == sorted(ids)
    cedulas = [c["cedula"] for c in clients]
    assert len(set(cedulas)) == len(cedulas)
    assert all(re.fullmatch(r"\d{6,10}", c) for c in cedulas)
    names = [c["nombre"] for c in clients]
    assert any(re.search("[ÁÉÍÓÚÑ]", n) for n in names)
    assert any(n != n.upper() for n in names)  # some hand-typed in mixed case
    phones = [c["telefono"] for c in clients]
    assert "" in phones
    assert any(re.search(r"\d[,/;]\s?3|\d 3", p) for p in phones)
    assert any(p.startswith(("+57", "57")) for p in phones)
    assert {c["direccion"].split()[0] for c in clients} >= {"VDA/", "B/", "V/", "VEREDA", "BARRIO"}
    formats = Counter("dmy" if "/" in c["fecha_corte"] else "iso" for c in clients)
    assert formats["dmy"] > 100 and formats["iso"] > 100
    assert any(re.fullmatch(r"\d/\d{2}/2026", c["fecha_corte"]) for c in clients)
    assert Counter(c["estado"] for c in clients).keys() == {
        "Activo",
        "Suspendido",
        "Cancelado",
        "Gratis",
    }
    assert Counter(c["estado"] for c in clients).most_common(1)[0][0] == "Activo"
    assert {c["estado_facturas"] for c in clients} == {"Pagadas", "Pendiente de Pago", "Vencidas"}
    assert any(c["saldo"].startswith("-") for c in clients)
    prices = Counter(c["precio_plan"] for c in clients)
    assert prices["0.00"] > 0 and prices[""] > 0 and prices["40000.00"] > 0
    assert any(c["zona"] is None for c in clients) and any(c["tecnico"] is None for c in clients)
    assert all(c["router"]["password_router"] and c["password_cpe"] for c in clients)


def test_zones_plans_staff_and_tickets() -> None:
    dataset = build_dataset(2000, 1)
    assert 5 <= len(dataset.zones) <= 15
    assert {p["tipo"] for p in dataset.plans} == {"PPPOE", "SIMPLE QUEUE", "PCQ"}
    assert 8 <= len(dataset.staff) <= 12
    assert len(dataset.tickets) == 300
    assert {t["estado"] for t in dataset.tickets} == {1, 2, 3, 4}
    active = Counter(t["servicio"]["zona"]["id"] for t in dataset.tickets if t["estado"] == 1)
    first, second, *rest = (zone["id"] for zone in dataset.zones)
    assert active[first] == 4 and active[second] == 3
    assert all(active[zone] < 3 for zone in rest)
    catalogue = {s for names in load_subjects().values() for s in names}
    assert all(t["asunto"] in catalogue for t in dataset.tickets)


def test_load_a_minimal_file_derives_zones_and_staff(tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    client = {
        "id_servicio": 5,
        "nombre": "ANA RÍOS",
        "zona": {"id": 9, "nombre": "Norte"},
        "tecnico": {"id": 3, "nombre": "Carlos"},
    }
    path.write_text(json.dumps({"clients": [client]}), "utf-8")
    dataset = load_dataset(path)
    assert dataset.clients == [client]
    assert dataset.zones == [{"id": 9, "nombre": "Norte"}]
    assert dataset.staff == [{"id": 3, "nombre": "Carlos"}]
    assert dataset.plans == [] and dataset.tickets == []


def test_load_normalises_tickets_and_plan_details(tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    document = {
        "clients": [{"id_servicio": 5, "nombre": "ANA", "zona": None}],
        "plans": [{"id": 2, "nombre": "P", "tipo": "PPPOE"}],
        "plan_details": {"2": {"precio": "1000.00", "bajada": "5M", "subida": "1M"}},
        "tickets": [
            {"id_ticket": 1, "estado": "En Progreso", "prioridad": "3", "servicio": 5},
            {
                "id_ticket": 2,
                "estado": 4,
                "prioridad": "Muy Alta",
                "respuestas": {"respuesta": "x"},
            },
        ],
    }
    path.write_text(json.dumps(document), "utf-8")
    dataset = load_dataset(path)
    assert dataset.plans[0]["precio"] == "1000.00" and dataset.plans[0]["bajada"] == "5M"
    one, two = dataset.tickets
    assert (one["estado"], one["prioridad"]) == (2, 3)
    assert one["servicio"]["id_servicio"] == 5 and one["respuestas"] == []
    assert (two["estado"], two["prioridad"]) == (4, 4)
    assert two["respuestas"] == [{"respuesta": "x"}]


def test_dump_then_load_round_trips(tmp_path: Path) -> None:
    dataset = build_dataset(50, 2, tickets=20)
    path = tmp_path / "dump.json"
    dump_dataset(dataset, path)
    loaded = load_dataset(path)
    assert loaded.clients == dataset.clients
    assert loaded.tickets == dataset.tickets
    assert loaded.plans == dataset.plans


@pytest.mark.parametrize(
    ("document", "named"),
    [
        ([], "'clients' list"),
        ({"plans": []}, "'clients' list"),
        ({"clients": [{"nombre": "sin id"}]}, "clients[0]"),
        ({"clients": [{"id_servicio": 1}, {"id_servicio": "2"}]}, "clients[1]"),
        ({"clients": [], "tickets": [{"asunto": "Internet Lento"}]}, "tickets[0]"),
        ({"clients": [], "plans": [{"id": 1, "nombre": "P", "tipo": "FIBRA"}]}, "plans[0]"),
        ({"clients": [], "tickets": [{"id_ticket": 1, "estado": "Abierto"}]}, "Abierto"),
        ({"clients": [], "plan_details": {"uno": {}}}, "plan_details"),
    ],
)
def test_load_names_what_is_wrong_in_a_file(tmp_path: Path, document: object, named: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document), "utf-8")
    with pytest.raises(DataFileError) as caught:
        load_dataset(path)
    assert named in str(caught.value)
    assert str(path) in str(caught.value)


def test_load_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match="No such file"):
        load_dataset(tmp_path / "missing.json")
    (tmp_path / "broken.json").write_text('{"clients": [', "utf-8")
    with pytest.raises(DataFileError, match=r"broken\.json"):
        load_dataset(tmp_path / "broken.json")


def test_zones_and_staff_derived_only_from_well_formed_refs(tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    clients = [
        {"id_servicio": 1, "zona": "Norte", "tecnico": None},
        {"id_servicio": 2, "zona": {"id": 4, "nombre": "Sur"}, "tecnico": {"nombre": "sin id"}},
    ]
    path.write_text(json.dumps({"clients": clients}), "utf-8")
    dataset = load_dataset(path)
    assert dataset.zones == [{"id": 4, "nombre": "Sur"}]
    assert dataset.staff == []
