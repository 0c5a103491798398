"""Lookups, search and list over loopback against the simulator, counting upstream calls."""

from __future__ import annotations

from typing import Any

import pytest

from tests.clients.conftest import StartPair, assert_fields, body, by_doc, calls, envelope, row
from tests.conftest import Gateway, Pair, Simulator
from tests.support import wait_until

SECRETS = ("cpe-secret-pw", "svc-secret-pw", "rt-pw", "AA:BB:CC:DD:EE:FF", "password")


def asked_again(gw: Gateway, sim: Simulator, path: str) -> bool:
    """One more lookup of `path`, which must answer 404: whether the upstream has now been
    asked a second time."""
    assert gw.get(path).status_code == 404
    return calls(sim) >= 2


def test_list_returns_only_active_clients_fully_mapped(pair: Pair) -> None:
    sim, gw = pair
    response = gw.get("/api/v1/clients/")
    out = envelope(response, 200)
    assert_fields(out, ok=True, type="success", action="clients_listed", meta=None)
    ids = [c["service_id"] for c in out["data"]]
    assert ids == [101, 103, 105, 106, 107]  # 102 Suspendido and 104 Cancelado left out
    first = out["data"][0]
    assert first == {
        "service_id": 101,
        "name": "JUAN CARLOS PÉREZ GÓMEZ",
        "document": "12345678",
        "phone": "3001234567,3109876543",
        "address": "VDA/ EL ROSAL CASA 4",
        "city": "Zipaquirá",
        "locality": "San Jorge",
        "payment_status": "Activo",
        "zone_id": 3,
        "antenna_ip": "172.16.0.2",
        "cut_off_date": "2026-03-05",
        "outstanding_balance": 60.0,
        "lan_interface": "ether1",
        "internet_plan_name": "PLAN 10MB",
        "internet_plan_price": 40000.0,
        "technician_id": 11,
        "service_state": "active",  # beyond the spec (BEYOND.md), added to every answer
    }
    assert not any(secret in response.text for secret in SECRETS)
    assert calls(sim) == 0  # served from the warm cache


def test_mapping_quirks(pair: Pair) -> None:
    _, gw = pair
    maria = body(gw.get("/api/v1/clients/by-service-id/102"))["data"]
    assert maria["cut_off_date"] == "2026-04-07"
    assert maria["outstanding_balance"] == -1500.5
    assert maria["zone_id"] is None and maria["technician_id"] is None
    assert maria["payment_status"] == "Suspendido"  # lookups see every client
    ana = body(gw.get("/api/v1/clients/by-service-id/103"))["data"]
    assert ana["internet_plan_price"] is None  # "" means unknown
    assert ana["phone"] is None
    assert body(gw.get("/api/v1/clients/by-service-id/104"))["data"]["internet_plan_price"] is None
    jose = body(gw.get("/api/v1/clients/by-service-id/107"))["data"]
    assert jose["cut_off_date"] is None  # 31/02 does not exist
    assert jose["outstanding_balance"] is None


@pytest.mark.parametrize("style", ["dmy", "iso"])
def test_cut_off_date_variants(start_pair: StartPair, style: str) -> None:
    from isp_gateway.simulator import Variants

    _, gw = start_pair({"variants": Variants(fecha_corte=style)})
    data = body(gw.get("/api/v1/clients/by-service-id/101"))["data"]
    assert data["cut_off_date"] == "2026-03-05"
    assert body(gw.get("/api/v1/clients/by-service-id/102"))["data"]["cut_off_date"] == (
        "2026-04-07"
    )


def test_by_document(pair: Pair) -> None:
    sim, gw = pair
    response = gw.get("/api/v1/clients/by-document/12345678")
    out = envelope(response, 200)
    assert out["action"] == "client_found" and out["data"]["service_id"] == 101
    # Letters are allowed, case-insensitively.
    assert body(gw.get("/api/v1/clients/by-document/ab12345"))["data"]["service_id"] == 103
    assert calls(sim) == 0


@pytest.mark.parametrize("document", ["12.345.678", "12-345", "ab", "x" * 21, "12%20345"])
def test_invalid_document_is_400(pair: Pair, document: str) -> None:
    sim, gw = pair
    response = gw.get(f"/api/v1/clients/by-document/{document}")
    out = envelope(response, 400)
    assert_fields(
        out, ok=False, action="invalid_document", message="Invalid document format", data=None
    )
    assert calls(sim) == 0


def test_unknown_document_asks_upstream_once_then_remembers(pair: Pair) -> None:
    sim, gw = pair
    for _ in range(3):
        response = gw.get("/api/v1/clients/by-document/424242")
        out = envelope(response, 404)
        assert_fields(
            out,
            ok=False,
            type="error",
            action="client_not_found",
            message="Client not found",
            data=None,
        )
    assert calls(sim) == 1  # one upstream query, then the remembered miss


def test_negative_cache_expires(start_pair: StartPair) -> None:
    # The confirmed-miss memory alone (no re-check window: see the MISS_RECHECK tests).
    # 3 s: the repeat must come within the memory, a margin a stalled test process keeps.
    sim, gw = start_pair(NEGATIVE_CACHE_SECONDS=3, MISS_RECHECK_SECONDS=0)
    assert gw.get("/api/v1/clients/by-document/424242").status_code == 404
    assert gw.get("/api/v1/clients/by-document/424242").status_code == 404
    assert calls(sim) == 1
    # Until the memory expires (3 s), the same 404 without asking upstream; then asked again.
    wait_until(lambda: asked_again(gw, sim, "/api/v1/clients/by-document/424242"))
    assert calls(sim) == 2


def test_new_customer_found_upstream_then_served_from_index(pair: Pair) -> None:
    sim, gw = pair
    # The upstream learns a document the cached list does not have yet.
    sim.state.update_profile(105, {"cedula": "77777777"})
    response = gw.get("/api/v1/clients/by-document/77777777")
    assert response.status_code == 200
    assert body(response)["data"]["service_id"] == 105
    assert calls(sim) == 1
    wait_until(  # the index is patched in the background
        lambda: by_doc(gw.runtime.services.clients.cache.local, "77777777") is not None,
        timeout=5,
        interval=0.01,
        message="the index to be patched",
    )
    response = gw.get("/api/v1/clients/by-document/77777777")
    assert response.status_code == 200 and body(response)["data"]["service_id"] == 105
    assert calls(sim) == 1


def test_concurrent_misses_make_one_upstream_query(pair: Pair) -> None:
    from concurrent.futures import ThreadPoolExecutor

    sim, gw = pair
    sim.state.faults.update({"latency": 0.3})
    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(lambda _: gw.get("/api/v1/clients/by-document/424242"), range(8)))
    assert [r.status_code for r in responses] == [404] * 8
    assert calls(sim) == 1


def test_shared_document_same_answer_cold_and_warm(
    start_simulator: Any, start_gateway: Any, tmp_path: Any
) -> None:
    import json

    from tests.clients.conftest import PLANS, row, warm

    shared = [
        row(201, cedula="31313131", estado="Cancelado"),
        row(202, cedula="31313131", estado="Activo"),
    ]
    path = tmp_path / "shared.json"
    path.write_text(json.dumps({"clients": shared, "plans": PLANS}), "utf-8")
    sim = start_simulator(data_file=path)
    # The start-up list load hangs, so the first lookup is answered by an upstream query.
    sim.state.faults.update({"latency": 2.0, "scopes": {"latency": {"path_prefix": "/api/"}}})
    gw = start_gateway(sim.url, UPSTREAM_TIMEOUT_SECONDS=5)
    sim.state.faults.reset()
    cold = body(gw.get("/api/v1/clients/by-document/31313131"))["data"]["service_id"]
    warm(gw)
    warmed = body(gw.get("/api/v1/clients/by-document/31313131"))["data"]["service_id"]
    assert cold == warmed == 202  # the active one


def test_lookup_never_says_not_found_when_upstream_fails(pair: Pair) -> None:
    sim, gw = pair
    sim.state.faults.update({"error_rate": 1.0})
    response = gw.get("/api/v1/clients/by-document/424242")
    out = envelope(response, 502)
    assert out["action"] == "upstream_unavailable" and out["ok"] is False
    # Nothing remembered: once the upstream is back, the lookup really asks.
    sim.state.faults.reset()
    assert gw.get("/api/v1/clients/by-document/424242").status_code == 404
    # A known client is still served from the cache while the upstream fails.
    sim.state.faults.update({"error_rate": 1.0})
    assert gw.get("/api/v1/clients/by-document/12345678").status_code == 200


@pytest.mark.parametrize(
    ("faults", "status", "action"),
    [
        ({"garbage": 1.0}, 502, "upstream_unavailable"),
        ({"hang_rate": 1.0}, 502, "upstream_unavailable"),
        ({"force_403": True}, 502, "CLIENT_NOT_FOUND"),
        ({"force_429": True, "retry_after": 7}, 503, "upstream_rate_limited"),
    ],
)
def test_lookup_miss_upstream_failure_modes(
    start_pair: StartPair, faults: dict[str, Any], status: int, action: str
) -> None:
    # Only the hang is meant to time out (soon); the other answers (the 403, the 429) must
    # arrive, in a margin a stalled test process keeps.
    sim, gw = start_pair(UPSTREAM_TIMEOUT_SECONDS=0.5 if "hang_rate" in faults else 2.0)
    sim.state.faults.update(faults)
    response = gw.get("/api/v1/clients/by-service-id/999")
    out = envelope(response, status)
    assert out["action"] == action and out["data"] is None
    if action == "CLIENT_NOT_FOUND":
        assert out["message"] == "Unable to fetch client data"
    if status == 503:
        assert response.headers["Retry-After"] == "7"
    assert "test-upstream-key" not in response.text


def test_by_phone(pair: Pair) -> None:
    sim, gw = pair
    cases = {
        "3001234567": 101,
        "3109876543": 101,  # the second number of the field
        "%2B573001234567": 101,  # "+57 ..." URL-encoded
        "0057%20300%20123%204567": 101,
        "(315)%20765-4321": 102,  # upstream stored "+57 3157654321"
        "3502223344": 104,  # space-separated numbers
        "3004445567": 107,  # "; "-separated
    }
    for phone, service_id in cases.items():
        response = gw.get(f"/api/v1/clients/by-phone/{phone}")
        assert response.status_code == 200, phone
        assert body(response)["data"]["service_id"] == service_id, phone
    assert calls(sim) == 0
    miss = gw.get("/api/v1/clients/by-phone/3119999999")
    assert miss.status_code == 404 and body(miss)["action"] == "client_not_found"
    bad = gw.get("/api/v1/clients/by-phone/12-34")
    assert bad.status_code == 400 and body(bad)["action"] == "invalid_phone"


def test_by_phone_with_one_number_per_field_variant(start_pair: StartPair) -> None:
    from isp_gateway.simulator import Variants

    _, gw = start_pair({"variants": Variants(phone_separators=False)})
    assert gw.get("/api/v1/clients/by-phone/3001234567").status_code == 200
    assert gw.get("/api/v1/clients/by-phone/3109876543").status_code == 404


def test_by_service_id(pair: Pair) -> None:
    sim, gw = pair
    out = body(gw.get("/api/v1/clients/by-service-id/106"))
    assert out["action"] == "client_found" and out["data"]["name"] == "ROSA DIAZ"
    bad = gw.get("/api/v1/clients/by-service-id/12a")
    assert bad.status_code == 400 and body(bad)["action"] == "invalid_service_id"
    miss = gw.get("/api/v1/clients/by-service-id/4040")
    assert miss.status_code == 404 and body(miss)["action"] == "client_not_found"
    assert calls(sim) == 1


def test_cold_lookup_asks_upstream_directly(
    start_simulator: Any, start_gateway: Any, data_file: Any
) -> None:
    # The list load hangs, so the cache stays cold; a lookup must not wait for it.
    sim = start_simulator(data_file=data_file)
    sim.state.faults.update({"latency": 2.0, "scopes": {"latency": {"path_prefix": "/api/"}}})
    gw = start_gateway(sim.url, UPSTREAM_TIMEOUT_SECONDS=5)
    sim.state.faults.reset()
    response = gw.get("/api/v1/clients/by-document/12345678")
    assert response.status_code == 200
    assert body(response)["data"]["service_id"] == 101


def test_requires_token(pair: Pair) -> None:
    _, gw = pair
    response = gw.client.get("/api/v1/clients/by-service-id/101")
    assert response.status_code == 401


def test_the_collector_runs_while_a_load_waits_for_the_upstream(
    start_simulator: Any, start_gateway: Any, data_file: Any
) -> None:
    """Packing a page pauses the garbage collector; waiting for the next page must not (a
    load paced by the upstream budget lasts minutes, and the process serves meanwhile)."""
    import gc
    import time

    from tests.clients.conftest import warm

    sim = start_simulator(data_file=data_file)
    # A 3 s page: the 0.6 s of samples after the start-up fall inside it even when the
    # start-up or the samples stall (up to a second on a loaded CI machine); the upstream
    # timeout well beyond it, so that the page is read rather than given up.
    sim.state.faults.update(
        {"latency": 3.0, "scopes": {"latency": {"path_prefix": "/api/clientes/"}}}
    )
    gw = start_gateway(sim.url, UPSTREAM_TIMEOUT_SECONDS=10)
    seen = set()
    # Real time: samples taken while the start-up load waits on the slow upstream.
    deadline = time.monotonic() + 0.6
    while time.monotonic() < deadline:
        assert gw.runtime.services.clients.cache.loads == 0  # the start-up load is waiting
        seen.add(gc.isenabled())
        time.sleep(0.01)  # the pace of the samples
    assert seen == {True}
    warm(gw)
    assert gc.isenabled()


# -- the miss re-check (CALLERS.md 2, issue 17) -------------------------------------------


@pytest.mark.parametrize(
    ("path", "other"),
    [
        ("/api/v1/clients/by-document/424242", "/api/v1/clients/by-document/424243"),
        ("/api/v1/clients/by-phone/3009990001", "/api/v1/clients/by-phone/3009990002"),
        ("/api/v1/clients/by-service-id/999991", "/api/v1/clients/by-service-id/999992"),
    ],
)
def test_a_loop_of_misses_on_one_value_costs_one_upstream_call(
    start_pair: StartPair, path: str, other: str
) -> None:
    # No confirmed-miss memory: only the re-check window holds the loop back.
    sim, gw = start_pair(NEGATIVE_CACHE_SECONDS=0)
    for _ in range(6):
        response = gw.get(path)
        assert response.status_code == 404
        assert body(response)["action"] == "client_not_found"
    assert calls(sim) == 1
    # Another value is its own question.
    assert gw.get(other).status_code == 404
    assert calls(sim) == 2


def test_the_miss_recheck_window_expires(start_pair: StartPair) -> None:
    # 3 s: the repeats must come within the window, a margin a stalled test process keeps.
    sim, gw = start_pair(NEGATIVE_CACHE_SECONDS=0, MISS_RECHECK_SECONDS=3)
    for _ in range(3):
        assert gw.get("/api/v1/clients/by-document/424242").status_code == 404
    assert calls(sim) == 1
    # Until the window ends (3 s), the same 404 without asking upstream; then asked again.
    wait_until(lambda: asked_again(gw, sim, "/api/v1/clients/by-document/424242"))
    assert calls(sim) == 2


def test_a_failed_recheck_is_no_answer_and_is_asked_again(start_pair: StartPair) -> None:
    sim, gw = start_pair(NEGATIVE_CACHE_SECONDS=0)
    sim.state.faults.update({"error_rate": 1.0})
    response = gw.get("/api/v1/clients/by-document/77777777")
    assert response.status_code == 502
    sim.state.faults.reset()
    # The upstream learns that document meanwhile: the next lookup asks, and finds it.
    sim.state.update_profile(105, {"cedula": "77777777"})
    response = gw.get("/api/v1/clients/by-document/77777777")
    assert response.status_code == 200 and body(response)["data"]["service_id"] == 105
    assert calls(sim) == 2


# -- documents with letters: the upstream's `cedula` filter is exact ----------------------


def _new_customer(sim: Simulator, document: str) -> None:
    """A customer the cached list does not know yet (added upstream since), whose document
    is stored as `document`."""
    sim.state.add_client(row(9001, cedula=document, telefono="3157778899"))


MEMORIES = [
    pytest.param({}, id="both"),
    pytest.param({"NEGATIVE_CACHE_SECONDS": 0}, id="recheck-slot"),
    pytest.param({"MISS_RECHECK_SECONDS": 0}, id="negative-cache"),
]


@pytest.mark.parametrize("memory", MEMORIES)
def test_a_new_customer_is_found_by_its_document_in_lower_case(
    start_pair: StartPair, memory: dict[str, Any]
) -> None:
    """Stored "PA778899", asked "pa778899": the upper-case form is asked too, and the
    exact document then answers 200 as well (it was answered 404 for the whole window: the
    miss of "pa778899" was remembered as one of "PA778899")."""
    sim, gw = start_pair(**memory)
    _new_customer(sim, "PA778899")
    response = gw.get("/api/v1/clients/by-document/pa778899")
    assert body(response)["data"]["service_id"] == 9001, response.text
    assert calls(sim) == 1  # "PA778899" found: "pa778899" was not asked
    wait_until(  # the index is patched in the background
        lambda: by_doc(gw.runtime.services.clients.cache.local, "PA778899") is not None,
        timeout=5,
        interval=0.01,
        message="the index to be patched",
    )
    for document in ("PA778899", "pA778899"):
        response = gw.get(f"/api/v1/clients/by-document/{document}")
        assert body(response)["data"]["service_id"] == 9001, (document, response.text)
    assert calls(sim) == 1


@pytest.mark.parametrize("memory", MEMORIES)
def test_a_miss_in_lower_case_is_no_miss_of_the_exact_document(
    start_pair: StartPair, memory: dict[str, Any]
) -> None:
    """Stored "Pa778899" (neither form a lower-case lookup asks): that lookup misses, and
    its misses are remembered for what it asked only, so the exact document is still
    found."""
    sim, gw = start_pair(**memory)
    _new_customer(sim, "Pa778899")
    assert gw.get("/api/v1/clients/by-document/pa778899").status_code == 404
    response = gw.get("/api/v1/clients/by-document/Pa778899")
    assert body(response)["data"]["service_id"] == 9001, response.text
    # "PA778899" and "pa778899", then only "Pa778899": "PA778899" was a miss remembered.
    assert calls(sim) == 3


def test_a_lookup_in_lower_case_in_flight_does_not_answer_for_the_exact_one(
    start_pair: StartPair,
) -> None:
    """A lookup in lower case is still waiting for the upstream when the exact document is
    looked up: the exact lookup shares only the question of a value it asks itself."""
    from concurrent.futures import ThreadPoolExecutor

    sim, gw = start_pair()
    _new_customer(sim, "Pa778899")
    sim.state.faults.update(
        {"latency": 0.5, "scopes": {"latency": {"path_prefix": "/api/clientes/"}}}
    )
    with ThreadPoolExecutor(1) as pool:
        lower = pool.submit(gw.get, "/api/v1/clients/by-document/pa778899")
        wait_until(lambda: calls(sim) >= 1, timeout=5, interval=0.01)
        exact = gw.get("/api/v1/clients/by-document/Pa778899")
        assert lower.result().status_code == 404
    assert body(exact)["data"]["service_id"] == 9001, exact.text
