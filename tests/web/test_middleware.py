"""The service's own rate limit: off by default, 429 `rate_limited` + Retry-After when on."""

from __future__ import annotations

import httpx

from tests.conftest import StartGateway
from tests.support import error_body, wait_for_fresh_window

PATH = "/api/v1/_probe/whoami"


def test_off_by_default(start_probe_gateway: StartGateway) -> None:
    gw = start_probe_gateway()
    assert gw.settings.RATE_LIMIT_PER_MINUTE == 0
    statuses = {gw.get(PATH).status_code for _ in range(40)}
    assert statuses == {200}


def test_on_limits_per_address(start_probe_gateway: StartGateway) -> None:
    gw = start_probe_gateway(RATE_LIMIT_PER_MINUTE=3)
    wait_for_fresh_window(60)
    for _ in range(3):
        assert gw.get(PATH).status_code == 200
    response = gw.get(PATH)
    assert response.status_code == 429
    assert response.json() == error_body("rate_limited", "Demasiadas solicitudes; más despacio")
    assert 1 <= int(response.headers["retry-after"]) <= 60
    assert response.headers["x-request-id"]
    # Outside /api/v1 nothing is limited: the load balancer's health checks keep working.
    assert gw.client.get("/health").status_code == 200
    # Another client address has its own allowance.
    transport = httpx.HTTPTransport(local_address="127.0.0.77")
    with httpx.Client(base_url=gw.url, transport=transport, headers=gw.auth) as other:
        assert other.get(PATH).status_code == 200


def test_per_subject_limit_holds_across_addresses(
    start_probe_gateway: StartGateway,
) -> None:
    gw = start_probe_gateway(RATE_LIMIT_PER_SUBJECT_PER_MINUTE=3)
    wait_for_fresh_window(60)
    for _ in range(3):
        assert gw.get(PATH).status_code == 200
    # The same token from another address: the subject's allowance is spent.
    transport = httpx.HTTPTransport(local_address="127.0.0.78")
    with httpx.Client(base_url=gw.url, transport=transport, headers=gw.auth) as other:
        response = other.get(PATH)
    assert response.status_code == 429
    assert response.json()["action"] == "rate_limited"
    assert 1 <= int(response.headers["retry-after"]) <= 60
    # Without a valid token there is no subject to count: the auth check answers.
    assert gw.client.get(PATH).status_code == 401


def test_token_endpoint_limit_answers_oauth_style(
    start_probe_gateway: StartGateway,
) -> None:
    gw = start_probe_gateway(RATE_LIMIT_PER_MINUTE=1)
    wait_for_fresh_window(60)
    form = {"username": "nobody", "password": "wrong"}
    assert gw.client.post("/api/v1/auth/token", data=form).status_code == 401
    response = gw.client.post("/api/v1/auth/token", data=form)
    assert response.status_code == 429
    assert response.json() == {"detail": "Too many requests."}
    assert response.headers["retry-after"]
