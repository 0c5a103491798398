"""Clients over HTTP: auth, trailing slash, pagination, filters, detail, perfil, variants."""

from __future__ import annotations

import re
from typing import Any

import pytest

from isp_gateway.simulator import Variants
from tests.conftest import StartGateway, StartSimulator
from tests.simulator.conftest import SimServer, StartSim


def _page(server: SimServer, **params: Any) -> dict[str, Any]:
    response = server.client.get("/api/clientes/", params=params)
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


@pytest.mark.parametrize("header", [None, "Api-Key wrong", "Token simulator-test-key", "Api-Key"])
def test_missing_or_wrong_key_is_403(server: SimServer, header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    with server.raw_client(headers=headers) as client:
        response = client.get("/api/clientes/")
    assert response.status_code == 403
    assert set(response.json()) == {"detail"}


def test_path_without_slash_redirects_301(server: SimServer) -> None:
    response = server.client.get("/api/clientes", params={"cedula": "1"})
    assert response.status_code == 301
    assert response.headers["location"] == f"{server.url}/api/clientes/?cedula=1"
    post = server.client.post("/api/tickets", json={})
    assert post.status_code == 301
    assert post.headers["location"] == f"{server.url}/api/tickets/"
    assert server.client.get("/api/nothing-here/").status_code == 404


def test_wrong_method_is_405(server: SimServer) -> None:
    assert server.client.delete("/api/clientes/").status_code == 405


def test_pagination_links_counts_and_caps(start_sim: StartSim) -> None:
    server = start_sim(clients=120, max_page_size=50, default_page_size=10)
    first = _page(server)
    assert first["count"] == 120 and len(first["results"]) == 10
    assert first["previous"] is None
    assert first["next"] == f"{server.url}/api/clientes/?limit=10&offset=10"
    assert first["next"].startswith("http://")

    middle = _page(server, limit=30, offset=30)
    assert [r["id_servicio"] for r in middle["results"]] == [
        r["id_servicio"] for r in _page(server, limit=50, offset=0)["results"][30:50]
    ] + [r["id_servicio"] for r in _page(server, limit=10, offset=50)["results"]]
    assert middle["previous"] == f"{server.url}/api/clientes/?limit=30"
    assert middle["next"] == f"{server.url}/api/clientes/?limit=30&offset=60"

    capped = _page(server, limit=1000)
    assert len(capped["results"]) == 50
    assert capped["next"] == f"{server.url}/api/clientes/?limit=50&offset=50"

    last = _page(server, limit=50, offset=100)
    assert len(last["results"]) == 20 and last["next"] is None
    assert last["previous"] == f"{server.url}/api/clientes/?limit=50&offset=50"
    assert _page(server, limit=50, offset=500)["results"] == []

    # Other query parameters survive in the links.
    filtered = _page(server, estado=1, limit=5)
    assert filtered["next"] == f"{server.url}/api/clientes/?estado=1&limit=5&offset=5"


def test_next_says_http_whatever_host_was_used(server: SimServer) -> None:
    response = server.client.get(
        "/api/clientes/", params={"limit": 5}, headers={"Host": "isp.example.com"}
    )
    assert response.json()["next"] == "http://isp.example.com/api/clientes/?limit=5&offset=5"


def test_every_page_walks_all_clients(server: SimServer) -> None:
    seen: list[int] = []
    offset = 0
    while True:
        page = _page(server, limit=37, offset=offset)
        seen += [row["id_servicio"] for row in page["results"]]
        if page["next"] is None:
            break
        offset += 37
    assert seen == [row["id_servicio"] for row in server.sim.dataset.clients]


def test_rows_carry_the_upstream_fields_and_secrets(server: SimServer) -> None:
    row = _page(server, limit=1)["results"][0]
    for name in [
        "id_servicio",
        "nombre",
        "cedula",
        "telefono",
        "direccion",
        "ciudad",
        "localidad",
        "estado",
        "estado_facturas",
        "zona",
        "ip",
        "fecha_corte",
        "saldo",
        "interfaz_lan",
        "plan_internet",
        "precio_plan",
        "tecnico",
        "usuario",
    ]:
        assert name in row
    assert set(row["plan_internet"]) == {"id", "nombre"}
    assert row["password_cpe"] and row["mac_cpe"]
    assert {"usuario_router", "password_router"} <= set(row["router"])


def test_working_filters(server: SimServer) -> None:
    clients = server.sim.dataset.clients
    target = clients[42]
    assert [r["id_servicio"] for r in _page(server, cedula=target["cedula"])["results"]] == [
        target["id_servicio"]
    ]
    by_id = _page(server, id_servicio=target["id_servicio"])
    assert by_id["count"] == 1 and by_id["results"][0]["cedula"] == target["cedula"]
    assert (
        _page(server, usuario=target["usuario"])["results"][0]["id_servicio"]
        == (target["id_servicio"])
    )
    surname = target["nombre"].split()[-1].lower()
    named = _page(server, nombre=surname, limit=1000)
    expected = [c["id_servicio"] for c in clients if surname in c["nombre"].casefold()]
    assert [r["id_servicio"] for r in named["results"]] == expected and expected
    suspended = _page(server, estado=2, limit=1000)
    assert suspended["count"] == sum(c["estado"] == "Suspendido" for c in clients) > 0
    assert {r["estado"] for r in suspended["results"]} == {"Suspendido"}


def test_cedula_is_exact_and_nombre_is_not_accent_insensitive(server: SimServer) -> None:
    target = server.sim.dataset.clients[0]
    assert _page(server, cedula=target["cedula"][:-1])["count"] == 0
    server.sim.dataset.clients[0]["nombre"] = "JOSÉ ÁLVARO PÉREZ GÓMEZ"
    assert _page(server, nombre="pérez gómez")["count"] >= 1
    assert target["id_servicio"] not in [
        r["id_servicio"] for r in _page(server, nombre="perez gomez", limit=1000)["results"]
    ]


def test_telefono_filter_is_a_substring_of_the_raw_field(server: SimServer) -> None:
    multi = next(
        c for c in server.sim.dataset.clients if re.search(r"\d\s*[,/;]\s*\d", c["telefono"])
    )
    second = re.split(r"\s*[,/;]\s*", multi["telefono"])[1]
    found = _page(server, telefono=second, limit=1000)["results"]
    assert multi["id_servicio"] in [r["id_servicio"] for r in found]
    # A normalised "+57" form that the raw field does not contain finds nothing.
    assert _page(server, telefono="+57" + second[-10:] + "9")["count"] == 0


@pytest.mark.parametrize(
    "params",
    [
        {"zona": "1"},
        {"search": "zzzz"},
        {"saldo": "0"},
        {"estado_facturas": "Vencidas"},
        {"fecha_corte": "2026-03-05"},
        {"fecha_instalacion_desde": "2030-01-01"},
        {"anything": "x"},
        {"cedula": ""},
    ],
)
def test_ignored_filters_return_everyone(server: SimServer, params: dict[str, str]) -> None:
    assert _page(server, **params)["count"] == 200


@pytest.mark.parametrize(
    "params",
    [{"cedula": "000"}, {"id_servicio": "99999999"}, {"id_servicio": "abc"}, {"estado": "Activo"}],
)
def test_no_match_is_an_empty_page(server: SimServer, params: dict[str, str]) -> None:
    assert _page(server, **params) == {"count": 0, "next": None, "previous": None, "results": []}


def test_client_detail_is_network_centric(server: SimServer) -> None:
    target = server.sim.dataset.clients[3]
    response = server.client.get(f"/api/clientes/{target['id_servicio']}/")
    assert response.status_code == 200
    detail = response.json()
    assert detail["id_servicio"] == target["id_servicio"] and detail["ip"] == target["ip"]
    assert not {"telefono", "saldo", "fecha_corte", "cedula"} & set(detail)
    assert server.client.get("/api/clientes/999999/").status_code == 404


def test_client_detail_may_have_null_name_and_user(server: SimServer) -> None:
    nulls = set()
    for row in server.sim.dataset.clients:
        detail = server.client.get(f"/api/clientes/{row['id_servicio']}/").json()
        nulls |= {key for key in ("nombre", "usuario") if detail[key] is None}
        if nulls == {"nombre", "usuario"}:
            break
    assert nulls == {"nombre", "usuario"}


@pytest.mark.parametrize("method", ["PATCH", "PUT"])
def test_perfil_updates_the_row(server: SimServer, method: str) -> None:
    target = server.sim.dataset.clients[5]
    service_id = target["id_servicio"]
    _page(server, id_servicio=service_id)  # warm the row cache first
    body = {"cedula": "ABC123", "telefono": "3001112233", "saldo": "-10", "ciudad": "Cali"}
    response = server.client.request(method, f"/api/clientes/{service_id}/perfil/", json=body)
    assert response.status_code == 200
    row = _page(server, id_servicio=service_id)["results"][0]
    assert (row["cedula"], row["telefono"], row["saldo"], row["ciudad"]) == (
        "ABC123",
        "3001112233",
        "-10.00",
        "Cali",
    )
    assert _page(server, cedula="ABC123")["results"][0]["id_servicio"] == service_id


def test_perfil_joins_nombre_and_apellidos(server: SimServer) -> None:
    service_id = server.sim.dataset.clients[0]["id_servicio"]
    body = {"nombre": "Ana María", "apellidos": "Ríos Peña"}
    assert server.client.patch(f"/api/clientes/{service_id}/perfil/", json=body).status_code == 200
    assert _page(server, id_servicio=service_id)["results"][0]["nombre"] == "Ana María Ríos Peña"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"cedula": "12"}, "cedula"),
        ({"cedula": "12.345.678"}, "cedula"),
        ({"cedula": "x" * 21}, "cedula"),
        ({"telefono": ["300"]}, "telefono"),
        ({"saldo": "mucho"}, "saldo"),
        ({"nombre": ""}, "nombre"),
        ({"direccion": {"calle": 1}}, "direccion"),
    ],
)
def test_perfil_bad_values_are_400_field_errors(
    server: SimServer, body: dict[str, Any], field: str
) -> None:
    row = server.sim.dataset.clients[0]
    before = dict(row)
    response = server.client.patch(f"/api/clientes/{row['id_servicio']}/perfil/", json=body)
    assert response.status_code == 400
    errors = response.json()
    assert list(errors) == [field] and isinstance(errors[field], list)
    assert row == before


def test_perfil_unknown_client_and_bad_json(server: SimServer) -> None:
    assert server.client.patch("/api/clientes/999999/perfil/", json={}).status_code == 404
    service_id = server.sim.dataset.clients[0]["id_servicio"]
    bad = server.client.patch(
        f"/api/clientes/{service_id}/perfil/",
        content=b"{nope",
        headers={"Content-Type": "application/json"},
    )
    assert bad.status_code == 400 and "detail" in bad.json()


def test_fecha_corte_variants(server: SimServer) -> None:
    def formats() -> set[str]:
        rows = _page(server, limit=200)["results"]
        return {"dmy" if "/" in r["fecha_corte"] else "iso" for r in rows}

    assert formats() == {"dmy", "iso"}
    server.sim.variants.fecha_corte = "iso"
    assert formats() == {"iso"}
    server.sim.variants.fecha_corte = "dmy"
    rows = _page(server, limit=200)["results"]
    assert all(re.fullmatch(r"\d{1,2}/\d{2}/\d{4}", r["fecha_corte"]) for r in rows)


def test_phone_and_price_variants(server: SimServer) -> None:
    rows = _page(server, limit=200)["results"]
    assert any(re.search(r"\d\s*[,/; ]\s*\+?\d", r["telefono"]) for r in rows)
    assert {"0.00", ""} <= {r["precio_plan"] for r in rows}
    response = server.client.put(
        f"{server.url}/_sim/variants", json={"phone_separators": False, "precio_plan": "real"}
    )
    assert response.status_code == 200
    rows = _page(server, limit=200)["results"]
    assert all(re.fullmatch(r"\+?\d*", r["telefono"]) for r in rows)
    assert not {"0.00", ""} & {r["precio_plan"] for r in rows}


def test_money_variant_strings_or_numbers(server: SimServer) -> None:
    rows = _page(server, limit=200)["results"]
    assert all(isinstance(r["saldo"], str) and isinstance(r["precio_plan"], str) for r in rows)
    pppoe = next(p["id"] for p in server.sim.dataset.plans if p["tipo"] == "PPPOE")
    assert isinstance(server.client.get(f"/api/plan-internet/pppoe/{pppoe}/").json()["precio"], str)
    response = server.client.put(f"{server.url}/_sim/variants", json={"money": "number"})
    assert response.status_code == 200 and response.json()["money"] == "number"
    rows = _page(server, limit=200)["results"]
    assert all(isinstance(r["saldo"], float) for r in rows)
    prices = [r["precio_plan"] for r in rows]
    assert None in prices  # the blank prices
    assert all(p is None or isinstance(p, float) for p in prices)
    assert any(p == 0.0 for p in prices)
    detail = server.client.get(f"/api/plan-internet/pppoe/{pppoe}/").json()
    assert isinstance(detail["precio"], float)
    bad = server.client.put(f"{server.url}/_sim/variants", json={"money": "cents"})
    assert bad.status_code == 400


@pytest.mark.parametrize("money", ["string", "number"])
def test_gateway_reads_money_either_way(
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
    money: str,
) -> None:
    sim = start_simulator(variants=Variants(money=money, precio_plan="real"))
    row = next(r for r in sim.state.dataset.clients if r["saldo"] not in ("0.00", ""))
    gw = start_gateway(sim.url)
    body = gw.get(f"/api/v1/clients/by-service-id/{row['id_servicio']}").json()
    assert body["action"] == "client_found", body
    assert body["data"]["outstanding_balance"] == float(row["saldo"])
    assert isinstance(body["data"]["internet_plan_price"], float)
