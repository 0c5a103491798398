"""GET /metrics on the real app: the BEYOND.md metric set, labels that never carry a raw path,
document or phone, and outcomes counted where they are rendered."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from isp_gateway.observability.http import MetricsMiddleware
from tests.clients.test_verify_update import GOOD
from tests.conftest import Gateway, Simulator, StartGateway, StartSimulator
from tests.support import wait_for_age, wait_until
from tests.tickets.conftest import build_dataset, ticket_body

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
LOOKUP = "/api/v1/clients/by-document/{document}"


def scrape(gw: Gateway) -> tuple[str, Samples]:
    response = gw.client.get("/metrics")  # no token
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return response.text, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum over the series of `name` whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


def documents(gw: Gateway, count: int) -> list[str]:
    rows = gw.get("/api/v1/clients/").json()["data"]
    return [row["document"] for row in rows if row.get("document")][:count]


def test_requests_are_labelled_by_route_template_fast_path_included(gateway: Gateway) -> None:
    docs = documents(gateway, 5)
    for doc in docs:
        for _ in range(4):  # the first is routed (it verifies the token), then the fast path
            assert gateway.get(f"/api/v1/clients/by-document/{doc}").status_code == 200
    assert gateway.get("/api/v1/clients/by-document/00000001").status_code == 404
    assert gateway.client.get("/no/such/path/31234567").status_code == 404
    assert gateway.client.get("/health").status_code == 200

    text, samples = scrape(gateway)
    counted = value(samples, "isp_gateway_requests_total", route=LOOKUP, method="GET", status="200")
    assert counted == 20
    assert value(samples, "isp_gateway_requests_total", route=LOOKUP, method="GET", status="404")
    assert value(
        samples, "isp_gateway_requests_total", route="unmatched", method="GET", status="404"
    )
    assert value(samples, "isp_gateway_requests_total", route="/health", method="GET", status="200")
    assert value(samples, "isp_gateway_request_duration_seconds_count", route=LOOKUP) >= 21
    # Never a raw path, a document or anything of the unknown path in a label.
    for doc in [*docs, "00000001", "31234567", "/no/such"]:
        assert doc not in text
    routes = {dict(ls).get("route") for (n, ls) in samples if n == "isp_gateway_requests_total"}
    assert all(
        r == "unmatched" or (r.startswith("/") and not re.search(r"\d{4}", r)) for r in routes
    )


def test_upstream_calls_by_endpoint_template_and_outcome(
    simulator: Simulator, start_gateway: StartGateway
) -> None:
    gw = start_gateway(simulator.url)
    documents(gw, 1)  # waits for the first load
    gw.get("/api/v1/plans/")
    _, samples = scrape(gw)
    ok = value(
        samples, "isp_gateway_upstream_requests_total", endpoint="GET /api/clientes/", outcome="ok"
    )
    assert ok == simulator.state.calls["GET /api/clientes/"] >= 1
    assert (
        value(
            samples,
            "isp_gateway_upstream_request_duration_seconds_count",
            endpoint="GET /api/clientes/",
        )
        == ok
    )

    simulator.state.faults.update({"error_rate": 1.0})
    # A miss in the index asks the upstream, which now fails.
    assert gw.get("/api/v1/clients/by-service-id/987654").status_code in (502, 503)
    simulator.state.faults.update({"error_rate": 0.0, "force_429": True})
    assert gw.get("/api/v1/clients/by-service-id/987655").status_code in (502, 503)
    simulator.state.faults.update({"force_429": False, "force_403": True})
    assert gw.get("/api/v1/clients/by-service-id/987656").status_code == 502
    simulator.state.faults.reset()
    # An unknown ticket: the upstream's JSON 404 is an answer about the request, not a failure.
    assert gw.get("/api/v1/tickets/987657").status_code == 404
    _, samples = scrape(gw)
    assert total(samples, "isp_gateway_upstream_requests_total", outcome="error") >= 1
    assert total(samples, "isp_gateway_upstream_requests_total", outcome="rate_limited") >= 1
    assert total(samples, "isp_gateway_upstream_requests_total", outcome="unauthorized") >= 1
    assert (
        value(
            samples,
            "isp_gateway_upstream_requests_total",
            endpoint="GET /api/tickets/{id}/",
            outcome="rejected",
        )
        == 1
    )
    endpoints = {
        dict(ls)["endpoint"] for (n, ls) in samples if n == "isp_gateway_upstream_requests_total"
    }
    # Ids become {id}: no number of a customer or ticket in a label.
    assert all(re.fullmatch(r"[A-Z]+ /[a-z_\-/{}]+/", e) for e in endpoints), endpoints


def test_budget_gauges_read_the_shared_counters(
    simulator: Simulator, start_gateway: StartGateway
) -> None:
    gw = start_gateway(simulator.url, UPSTREAM_RATE_PER_MINUTE=5000, UPSTREAM_RATE_PER_HOUR=90000)
    documents(gw, 1)
    _, samples = scrape(gw)
    used = simulator.state.calls["GET /api/clientes/"]
    assert value(samples, "isp_gateway_upstream_budget_limit", window="minute") == 5000
    assert value(samples, "isp_gateway_upstream_budget_limit", window="hour") == 90000
    minute = value(samples, "isp_gateway_upstream_budget_remaining", window="minute")
    hour = value(samples, "isp_gateway_upstream_budget_remaining", window="hour")
    # Other calls (plans) may have been made too; the remaining budget reflects all of them.
    assert minute <= 5000 - used and hour <= 90000 - used
    assert minute > 4000 and hour > 89000


def test_cache_age_and_stale_copies_served(
    simulator: Simulator, start_gateway: StartGateway
) -> None:
    gw = start_gateway(simulator.url, CLIENT_CACHE_SECONDS=1)
    doc = documents(gw, 1)[0]
    _, samples = scrape(gw)
    assert 0 <= value(samples, "isp_gateway_cache_age_seconds", resource="clients") < 60
    assert value(samples, "isp_gateway_stale_served_total", resource="clients") == 0
    simulator.state.faults.update({"error_rate": 1.0})
    # Past its lifetime (1 s), and as old as the age asserted below.
    wait_for_age(gw.runtime.services.clients.cache, 1.3)
    for _ in range(3):
        response = gw.get(f"/api/v1/clients/by-document/{doc}")
        assert response.status_code == 200
        # CALLERS.md 2: a document lookup's meta also names the other services (none here).
        assert response.json()["meta"] == {"other_service_ids": [], "stale": True}
    _, samples = scrape(gw)
    assert value(samples, "isp_gateway_stale_served_total", resource="clients") >= 3
    assert value(samples, "isp_gateway_cache_age_seconds", resource="clients") >= 1.3


def test_every_list_kept_warm_reports_its_age_and_planned_refresh(gateway: Gateway) -> None:
    documents(gateway, 1)  # the client list is loaded; the others load in the background
    wanted = {"clients", "invoices:pending", "tickets:active", "routers"}

    def every_age() -> tuple[dict[str, float], Samples] | None:
        _, samples = scrape(gateway)
        ages = {
            dict(ls)["resource"]: v
            for (n, ls), v in samples.items()
            if n == "isp_gateway_cache_age_seconds"
        }
        return (ages, samples) if wanted <= set(ages) else None

    ages, samples = wait_until(every_age, timeout=30, interval=0.1, message=f"ages of {wanted}")
    assert wanted <= set(ages), ages
    assert all(0 <= ages[name] < 120 for name in wanted), ages
    # The planner's intervals: never shorter than 80 % of a configured lifetime.
    settings = gateway.settings
    configured = {
        "clients": settings.CLIENT_CACHE_SECONDS,
        "invoices:pending": settings.INVOICE_CACHE_SECONDS,
        "tickets:active": settings.ACTIVE_TICKETS_CACHE_SECONDS,
        "routers": settings.OUTAGE_CACHE_SECONDS,
        "payments:methods": settings.PAYMENT_METHODS_CACHE_SECONDS,
        "plans:list": settings.PLAN_CACHE_SECONDS,
    }
    # Every list kept warm spends the upstream budget, so every one is in the plan.
    planned = {
        dict(ls)["resource"] for (n, ls) in samples if n == "isp_gateway_refresh_interval_seconds"
    }
    assert planned == set(configured), planned
    for name, lifetime in configured.items():
        interval = value(samples, "isp_gateway_refresh_interval_seconds", resource=name)
        assert interval >= 0.8 * lifetime - 0.01, (name, interval)


@pytest.fixture
def ticket_sim(tmp_path: Path, start_simulator: StartSimulator) -> Simulator:
    path = tmp_path / "upstream.json"
    path.write_text(json.dumps(build_dataset(), ensure_ascii=False), "utf-8")
    return start_simulator(data_file=path)


def test_ticket_outcomes_by_the_answers_action(
    ticket_sim: Simulator, start_gateway: StartGateway
) -> None:
    gw = start_gateway(ticket_sim.url)
    key = {"Idempotency-Key": "metrics-test-key-1"}
    # Zone 1 has one free slot: one creation, then the cap refuses.
    assert gw.post("/api/v1/tickets", json=ticket_body(zone_id=1), headers=key).status_code == 201
    # The same key replays the first answer: not a second outcome.
    assert gw.post("/api/v1/tickets", json=ticket_body(zone_id=1), headers=key).status_code == 201
    refused = gw.post("/api/v1/tickets", json=ticket_body(zone_id=1, description="another"))
    assert refused.status_code == 409
    # Service 201 is in the full zone 2 (naming its zone: the cap; another: a mismatch).
    assert (
        gw.post("/api/v1/tickets/", json=ticket_body(zone_id=2, service_id=201)).status_code == 409
    )
    assert (
        gw.post("/api/v1/tickets/", json=ticket_body(zone_id=3, service_id=201)).status_code == 422
    )
    bad = gw.post("/api/v1/tickets", json=ticket_body(subject="Not a subject"))
    assert bad.status_code == 400 and bad.json()["action"] == "ticket_creation_failed"
    _, samples = scrape(gw)
    assert value(samples, "isp_gateway_tickets_total", outcome="created") == 1
    assert value(samples, "isp_gateway_tickets_total", outcome="zone_limit") == 2
    assert value(samples, "isp_gateway_tickets_total", outcome="failed") == 1
    assert value(samples, "isp_gateway_tickets_total", outcome="zone_mismatch") == 1
    assert ("isp_gateway_tickets_total", frozenset({("outcome", "duplicate")})) in samples


def test_throttles_by_kind(simulator: Simulator, start_gateway: StartGateway) -> None:
    gw = start_gateway(simulator.url, LOGIN_MAX_FAILURES=1, VERIFY_MAX_FAILURES=1)
    form = {"username": "bot", "password": "wrong password"}
    assert gw.client.post("/api/v1/auth/token", data=form).status_code == 401
    assert gw.client.post("/api/v1/auth/token", data=form).status_code == 429
    sid = gw.get("/api/v1/clients/").json()["data"][0]["service_id"]
    wrong = {**GOOD, "name": "Nobody Atall", "address": "Nowhere"}
    codes = [gw.post(f"/api/v1/clients/{sid}/verify", json=wrong).status_code for _ in range(3)]
    assert codes[-1] == 429
    _, samples = scrape(gw)
    assert value(samples, "isp_gateway_throttled_total", kind="login") == 1
    assert value(samples, "isp_gateway_throttled_total", kind="verify") == codes.count(429)
    assert value(samples, "isp_gateway_throttled_total", kind="rate_limit") == 0

    limited = start_gateway(simulator.url, RATE_LIMIT_PER_MINUTE=2)
    codes = [limited.get("/api/v1/clients/by-service-id/1").status_code for _ in range(4)]
    assert codes.count(429) == 2
    _, samples = scrape(limited)
    assert value(samples, "isp_gateway_throttled_total", kind="rate_limit") == 2
    # The rate limiter answers before routing; the request is still labelled by its template.
    assert (
        value(
            samples,
            "isp_gateway_requests_total",
            route="/api/v1/clients/by-service-id/{service_id}",
            method="GET",
            status="429",
        )
        == 2
    )


def test_metrics_disabled_means_no_route_and_no_middleware(
    simulator: Simulator, start_gateway: StartGateway
) -> None:
    gw = start_gateway(simulator.url, METRICS_ENABLED=False)
    assert gw.client.get("/health").status_code == 200
    response = gw.client.get("/metrics")
    assert response.status_code == 404 and response.json()["ok"] is False
    assert gw.runtime.metrics is None and gw.runtime.gateway.metrics is None
    assert all(m.cls is not MetricsMiddleware for m in gw.app.user_middleware)
