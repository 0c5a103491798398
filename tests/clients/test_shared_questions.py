"""CALLERS.md 6 "Reads that are whole, everywhere": concurrent lookups of one value the index
does not know wait for the one upstream question in flight and share its answer; none of
them answers 404 while the question is open (issue 24: ten concurrent ticket creations for a
customer added after the list was cached: one asked, nine answered `client_not_found` at
once). On `isp-gateway serve --workers 2` with a real Redis: the question is shared by the
workers too (the asker writes the answer in the value's recheck slot, the others poll it)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import PASSWORD, USERNAME, Simulator, StartSimulator, serve_env
from tests.support import data_file_of, emptied_redis, serving_workers
from tests.tickets.conftest import TECH, build_dataset

REDIS_DB = 2
NEW = 777  # added upstream after the gateway cached its list
NEW_ROW = {
    "id_servicio": NEW,
    "nombre": "CLIENTE RECIEN LLEGADO",
    "cedula": "77700777",
    "telefono": "3007770777",
    "direccion": "B/ NUEVO",
    "estado": "Activo",
    "zona": {"id": 5, "nombre": "Zona 5"},
    "tecnico": TECH,
}
CONCURRENT = 10


@pytest.fixture
def served(
    start_simulator: StartSimulator,
    password_hash: str,
    tmp_path: Path,
    redis_url: Callable[[int], str],
) -> Iterator[tuple[Simulator, str, dict[str, str]]]:
    """`serve --workers 2` on a shared Redis, its client list cached on both workers; the
    simulator, the URL and a Bearer header."""
    sim = start_simulator(data_file=data_file_of(tmp_path / "upstream.json", build_dataset()))
    with emptied_redis(redis_url(REDIS_DB)):
        env = serve_env(
            sim.url,
            password_hash,
            REDIS_URL=redis_url(REDIS_DB),
            CLIENT_CACHE_SECONDS="600",
            # Ten tickets of one service in one zone: neither the cap nor the duplicate
            # guard is what this test is about.
            MAX_ACTIVE_TICKETS_PER_ZONE="50",
            DUPLICATE_TICKET_GUARD="false",
        )
        with serving_workers(env, tmp_path, "/ready") as url:
            form = {"username": USERNAME, "password": PASSWORD}
            token = httpx.post(f"{url}/api/v1/auth/token", data=form).json()["access_token"]
            auth = {"Authorization": f"Bearer {token}"}
            # The list is cached on both workers (fresh connections reach either).
            deadline = time.monotonic() + 30
            while (
                sum(_get(url, "/api/v1/clients/by-service-id/101", auth) == 200 for _ in range(8))
                < 8
            ):
                assert time.monotonic() < deadline, "the client list never loaded"
                time.sleep(0.2)
            yield sim, url, auth


def _get(url: str, path: str, auth: dict[str, str]) -> int:
    return httpx.get(url + path, headers={**auth, "Connection": "close"}, timeout=30).status_code


def _slow_questions(sim: Simulator, new: dict[str, Any] = NEW_ROW) -> None:
    """The new customer is added upstream, and the backend takes 0.8 s to answer a query
    about it: every concurrent lookup arrives while the question is open."""
    sim.state.add_client(new)
    sim.state.faults.update(
        {"latency": [0.8, 0.8], "scopes": {"latency": {"path_prefix": "/api/clientes/"}}}
    )
    sim.state.reset_stats()


def _at_once(job: Callable[[int], Any]) -> list[Any]:
    with ThreadPoolExecutor(CONCURRENT) as pool:
        return list(pool.map(job, range(CONCURRENT)))


def test_concurrent_lookups_of_a_new_customer_share_one_question(
    served: tuple[Simulator, str, dict[str, str]],
) -> None:
    sim, url, auth = served
    _slow_questions(sim)
    path = "/api/v1/clients/by-document/77700777"
    statuses = _at_once(lambda _: _get(url, path, auth))
    assert statuses == [200] * CONCURRENT
    # One question, across both workers; the customer is in the cached list from then on.
    assert sim.state.calls["GET /api/clientes/"] == 1
    assert _get(url, f"/api/v1/clients/by-service-id/{NEW}", auth) == 200
    assert sim.state.calls["GET /api/clientes/"] == 1


def test_concurrent_lookups_in_lower_case_find_a_document_stored_in_upper_case(
    served: tuple[Simulator, str, dict[str, str]],
) -> None:
    """A new customer whose document holds letters, looked up in lower case on both
    workers at once: they share the question of the upper-case form (the upstream's filter
    is exact) and find it; the exact document is found too, with no further call (it
    answered 404 for the whole recheck window when the lower-case text was sent and its miss
    remembered under the upper-case one)."""
    sim, url, auth = served
    _slow_questions(sim, {**NEW_ROW, "cedula": "PA778899"})
    statuses = _at_once(lambda _: _get(url, "/api/v1/clients/by-document/pa778899", auth))
    assert statuses == [200] * CONCURRENT
    assert _get(url, "/api/v1/clients/by-document/PA778899", auth) == 200
    assert sim.state.calls["GET /api/clientes/"] == 1


def test_concurrent_ticket_creations_for_a_new_customer_share_one_question(
    served: tuple[Simulator, str, dict[str, str]],
) -> None:
    sim, url, auth = served
    _slow_questions(sim)

    def create(n: int) -> int:
        body = {
            "service_id": NEW,
            "subject": "Internet Lento",
            "description": f"creación concurrente {n}",
            "technician_id": TECH["id"],
            "zone_id": 5,
        }
        headers = {**auth, "Connection": "close", "Idempotency-Key": uuid.uuid4().hex}
        response = httpx.post(f"{url}/api/v1/tickets", json=body, headers=headers, timeout=30)
        return response.status_code

    assert _at_once(create) == [201] * CONCURRENT
    assert sim.state.calls["GET /api/clientes/"] == 1
    assert sim.state.calls["POST /api/tickets/"] == CONCURRENT


def test_concurrent_lookups_share_a_failed_question_as_a_failure(
    served: tuple[Simulator, str, dict[str, str]],
) -> None:
    """The one question comes back short (`count` 1, no row): every lookup waiting for it
    answers the failure (502), none 404; the next lookup asks again and finds the customer."""
    sim, url, auth = served
    _slow_questions(sim)
    sim.state.faults.update(
        {"short_page": True, "scopes": {"short_page": {"path_prefix": "/api/clientes/"}}}
    )
    path = f"/api/v1/clients/by-service-id/{NEW}"
    statuses = _at_once(lambda _: _get(url, path, auth))
    assert 404 not in statuses
    assert set(statuses) == {502}
    sim.state.faults.reset()
    assert _get(url, path, auth) == 200
