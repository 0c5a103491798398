"""Answers a bot can say (CALLERS.md 2): by-document and by-phone name the other services
sharing the value, on the lookup edge and the full stack alike; search says how many match."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from isp_gateway.auth.tokens import issue_token
from tests.clients.conftest import PLANS, calls, row, warm
from tests.conftest import USERNAME, Gateway, Pair, StartGateway, StartSimulator

# One document held by three services (listed out of id order), one phone by two.
SHARED = [
    row(304, cedula="42424242", telefono="3004440000", estado="Suspendido"),
    row(301, cedula="42424242", telefono="3005550000", estado="Cancelado"),
    row(303, cedula="42424242", telefono="3007770000"),
    row(302, cedula="50505050", telefono="3008880000,3005550000"),
    row(305, cedula="60606060", telefono="3009990000"),
]

# path → (the service answered, the others named)
EXPECTED = {
    "/api/v1/clients/by-document/42424242": (303, [301, 304]),
    "/api/v1/clients/by-phone/3005550000": (302, [301]),
    "/api/v1/clients/by-phone/%2B57%20300-555-0000": (302, [301]),
    "/api/v1/clients/by-document/60606060": (305, []),
    "/api/v1/clients/by-phone/3009990000": (305, []),
}


@pytest.fixture
def shared_file(tmp_path: Path) -> Path:
    path = tmp_path / "shared.json"
    path.write_text(json.dumps({"clients": SHARED, "plans": PLANS}), "utf-8")
    return path


@pytest.fixture
def shared(
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
    shared_file: Path,
) -> Pair:
    sim = start_simulator(data_file=shared_file)
    gw = start_gateway(sim.url)
    warm(gw)
    sim.state.reset_stats()
    return sim, gw


def _fresh_headers(gw: Gateway) -> dict[str, str]:
    # A token this process has not verified yet: its first use goes through the regular
    # route, its next ones are eligible for the lookup edge.
    token = issue_token(gw.settings, USERNAME, now=datetime.now(UTC) - timedelta(seconds=1))
    return {"Authorization": f"Bearer {token}"}


def test_edge_and_full_stack_name_the_other_services_alike(
    shared: Pair,
) -> None:
    sim, gw = shared
    for path, (chosen, others) in EXPECTED.items():
        headers = _fresh_headers(gw)
        regular = gw.client.get(path, headers=headers)
        fast = [gw.client.get(path, headers=headers) for _ in range(3)]
        assert regular.status_code == 200, regular.text
        out = regular.json()
        assert out["data"]["service_id"] == chosen
        assert out["meta"] == {"other_service_ids": others}, path
        # The edge's prebuilt bytes are the regular route's, every time.
        assert all(f.content == regular.content for f in fast), path
    # A service-id lookup names no others: its meta stays null.
    out = gw.get("/api/v1/clients/by-service-id/303").json()
    assert out["meta"] is None
    assert calls(sim) == 0


def test_a_document_asked_in_a_loop_never_drops_a_service(
    shared: Pair,
) -> None:
    _, gw = shared
    headers = _fresh_headers(gw)
    seen = {
        tuple(gw.client.get(path, headers=headers).json()["meta"]["other_service_ids"])
        for path in ["/api/v1/clients/by-document/42424242"] * 5
    }
    assert seen == {(301, 304)}


def test_others_change_when_a_client_changes_document(
    shared: Pair,
) -> None:
    _, gw = shared
    headers = _fresh_headers(gw)
    path = "/api/v1/clients/by-document/42424242"
    assert gw.client.get(path, headers=headers).json()["meta"]["other_service_ids"] == [301, 304]
    gw.client.get(path, headers=headers)  # memoised on the edge
    updated = gw.put("/api/v1/clients/304", json={"document": "70707070"})
    assert updated.status_code == 200, updated.text
    for _ in range(2):
        out = gw.client.get(path, headers=headers).json()
        assert out["meta"]["other_service_ids"] == [301]


def test_a_cold_lookup_names_the_same_others(
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
    shared_file: Path,
) -> None:
    sim = start_simulator(data_file=shared_file)
    # The start-up list load hangs, so the first lookup is answered by an upstream query.
    sim.state.faults.update({"latency": 2.0, "scopes": {"latency": {"path_prefix": "/api/"}}})
    gw = start_gateway(sim.url, UPSTREAM_TIMEOUT_SECONDS=5)
    sim.state.faults.reset()
    cold = gw.get("/api/v1/clients/by-document/42424242").json()
    assert cold["data"]["service_id"] == 303
    assert cold["meta"]["other_service_ids"] == [301, 304]
    warm(gw)
    warmed = gw.get("/api/v1/clients/by-document/42424242").json()
    assert warmed["data"]["service_id"] == 303
    assert warmed["meta"] == {"other_service_ids": [301, 304]}


QUERIES = ["ana", "rosa", "perez", "porvenir diaz", "3004445566", "12345678", "cliente", "zzzz"]


def test_search_says_how_many_match_in_all(pair: Pair) -> None:
    _, gw = pair
    for q in QUERIES:
        everything = gw.get("/api/v1/clients/search", params={"q": q, "limit": 200}).json()
        ids = [c["service_id"] for c in everything["data"]]
        assert everything["meta"] == {"total": len(ids), "has_more": False}, q
        for limit in (1, 2, 3):
            page = gw.get("/api/v1/clients/search", params={"q": q, "limit": limit}).json()
            assert [c["service_id"] for c in page["data"]] == ids[:limit], (q, limit)
            assert page["meta"] == {"total": len(ids), "has_more": len(ids) > limit}, (q, limit)
            assert page["action"] == ("clients_listed" if ids else "client_not_found")


def test_search_total_counts_every_match_past_the_page(
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
    tmp_path: Path,
) -> None:
    many: list[dict[str, Any]] = [
        row(400 + i, nombre=f"ANA {'RUIZ' if i % 2 else 'GIL'}", cedula=str(5_000_000 + i))
        for i in range(120)
    ]
    path = tmp_path / "many.json"
    path.write_text(json.dumps({"clients": many, "plans": PLANS}), "utf-8")
    sim = start_simulator(data_file=path)
    gw = start_gateway(sim.url)
    warm(gw)
    for q, total in (("ana", 120), ("ana ruiz", 60), ("an", 120), ("gil", 60)):
        out = gw.get("/api/v1/clients/search", params={"q": q, "limit": 7}).json()
        assert len(out["data"]) == 7
        assert out["meta"] == {"total": total, "has_more": True}, q


def test_the_generated_answer_cases_name_both_services(
    start_simulator: StartSimulator, start_gateway: StartGateway
) -> None:
    """The simulator's generated data with its answer cases (the demo's): a customer with a
    second service, and a relative on another customer's phone."""
    sim = start_simulator(clients=40, answer_cases=True)
    rows = sim.state.dataset.clients
    assert len(rows) == 43  # the forty generated customers stay, three are added
    first, second = rows[0], rows[1]
    twin, relative = rows[40], rows[41]
    gw = start_gateway(sim.url)
    warm(gw)
    by_document = gw.get(f"/api/v1/clients/by-document/{first['cedula']}").json()
    ids = sorted([first["id_servicio"], twin["id_servicio"]])
    assert by_document["data"]["service_id"] in ids
    others = [i for i in ids if i != by_document["data"]["service_id"]]
    assert by_document["meta"] == {"other_service_ids": others}
    phone = str(second["telefono"]).replace(",", " ").split()[0]
    by_phone = gw.get(f"/api/v1/clients/by-phone/{phone}").json()
    pair = sorted([second["id_servicio"], relative["id_servicio"]])
    assert by_phone["data"]["service_id"] in pair
    assert by_phone["meta"]["other_service_ids"] == [
        i for i in pair if i != by_phone["data"]["service_id"]
    ]
    # The relative's own document is theirs alone.
    alone = gw.get(f"/api/v1/clients/by-document/{relative['cedula']}").json()
    assert alone["data"]["service_id"] == relative["id_servicio"]
    assert alone["meta"] == {"other_service_ids": []}


def test_a_search_total_follows_an_update(shared: Pair) -> None:
    _, gw = shared

    def meta() -> Any:
        return gw.get("/api/v1/clients/search", params={"q": "42424242", "limit": 1}).json()["meta"]

    assert meta() == meta() == {"total": 3, "has_more": True}
    assert gw.put("/api/v1/clients/304", json={"document": "70707070"}).status_code == 200
    assert meta() == {"total": 2, "has_more": True}
