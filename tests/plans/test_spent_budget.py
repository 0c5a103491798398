"""A spent upstream budget is 503 `upstream_rate_limited` with Retry-After, never 502
(issue 24: schemathesis saw `GET /internet-plans/524288` answer 502 "The ISP backend is not
available" with the backend up and the budget spent).

The plan catalogue does not know 524288, so the request reloads it, and that reload is
background work: the budget keeps it waiting for room instead of refusing it. The request
used to wait for it until its deadline and then answer as for a backend that does not
answer. Now it learns from the budget that the load is held, and answers at once."""

from __future__ import annotations

import time

import httpx

from tests.conftest import Gateway, Simulator, StartGateway

UNKNOWN_PLAN = "/api/v1/internet-plans/524288"


def spend_the_budget(gw: Gateway) -> None:
    """Lookup misses (each one an upstream call) until the budget refuses one."""
    for n in range(200):
        answer = gw.get(f"/api/v1/clients/by-document/{90000000 + n}")
        if answer.status_code == 503:
            assert answer.json()["action"] == "upstream_rate_limited"
            return
        assert answer.status_code == 404, answer.text
    raise AssertionError("the budget was never spent")


def assert_rate_limited(answer: httpx.Response) -> None:
    assert answer.status_code == 503, answer.text
    body = answer.json()
    assert (body["ok"], body["action"]) == (False, "upstream_rate_limited")
    assert 1 <= int(answer.headers["Retry-After"]) <= 60


def test_an_unknown_plan_with_the_budget_spent_is_503_at_once(
    simulator: Simulator, start_gateway: StartGateway
) -> None:
    gw = start_gateway(
        simulator.url,
        UPSTREAM_RATE_PER_MINUTE=20,
        # A miss of the catalogue reloads it at once (not only a minute after its load).
        NEGATIVE_CACHE_SECONDS=0,
    )
    assert gw.get("/api/v1/internet-plans/").status_code == 200
    spend_the_budget(gw)
    plans_before = simulator.state.calls["GET /api/plan-internet/"]
    for _ in range(3):
        started = time.monotonic()
        answer = gw.get(UNKNOWN_PLAN)
        assert_rate_limited(answer)
        # At once: not after waiting out the request's deadline (UPSTREAM_TIMEOUT_SECONDS).
        assert time.monotonic() - started < gw.settings.UPSTREAM_TIMEOUT_SECONDS - 1
    # The reload waits for the budget; it never went past it.
    assert simulator.state.calls["GET /api/plan-internet/"] == plans_before
    # A known plan is still answered from the catalogue.
    known = simulator.state.dataset.plans[0]["id"]
    assert gw.get(f"/api/v1/internet-plans/{known}").status_code in (200, 503)
