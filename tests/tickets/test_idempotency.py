"""Idempotency-Key on creation, and repeats of a creation whose answer (or record) was lost."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from isp_gateway.simulator import SimulatorConfig, create_simulator_app
from tests.conftest import API_KEY, Gateway, Simulator, StartGateway, start_redis_server
from tests.support import run_server
from tests.tickets.conftest import (
    AfterTicketPost,
    InFrontOfSimulator,
    LossyUpstream,
    hang_ticket_posts,
    post_calls,
    refusal,
    ticket_body,
)

KEY = {"Idempotency-Key": "7f1c9e2a-bot-attempt-1"}


def test_a_sequential_repeat_returns_the_first_answer(gw: Gateway, sim: Simulator) -> None:
    first = gw.post("/api/v1/tickets", json=ticket_body(zone_id=3, service_id=301), headers=KEY)
    assert first.status_code == 201
    again = gw.post("/api/v1/tickets", json=ticket_body(zone_id=3, service_id=301), headers=KEY)
    assert again.status_code == 201
    assert again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert len(sim.state.created_tickets) == 1
    assert post_calls(sim) == 1
    # Another key is another request (another subject: the same one is a duplicate).
    other = gw.post(
        "/api/v1/tickets",
        json=ticket_body(zone_id=3, service_id=301, subject="Internet Lento"),
        headers={"Idempotency-Key": "another"},
    )
    assert other.status_code == 201
    assert other.json()["data"]["ticket_id"] != first.json()["data"]["ticket_id"]


def test_the_replay_holds_even_when_the_zone_filled_up_since(gw: Gateway, sim: Simulator) -> None:
    first = gw.post("/api/v1/tickets", json=ticket_body(), headers=KEY)  # the zone's last slot
    assert first.status_code == 201
    again = gw.post("/api/v1/tickets", json=ticket_body(), headers=KEY)
    assert (again.status_code, again.json()) == (201, first.json())
    assert gw.post("/api/v1/tickets", json=ticket_body()).status_code == 409


def test_same_key_with_another_body_is_422(gw: Gateway, sim: Simulator) -> None:
    assert gw.post("/api/v1/tickets", json=ticket_body(), headers=KEY).status_code == 201
    response = gw.post("/api/v1/tickets", json=ticket_body(description="otra cosa"), headers=KEY)
    assert response.status_code == 422
    body = response.json()
    assert (body["ok"], body["action"], body["data"]) == (False, "idempotency_key_reused", None)
    assert len(sim.state.created_tickets) == 1


def test_concurrent_repeats_of_one_key_create_one_ticket(gw: Gateway, sim: Simulator) -> None:
    def create(_: int) -> httpx.Response:
        return gw.post("/api/v1/tickets", json=ticket_body(zone_id=3, service_id=302), headers=KEY)

    with ThreadPoolExecutor(10) as pool:
        responses = list(pool.map(create, range(10)))
    assert {r.status_code for r in responses} == {201}
    assert len({r.json()["data"]["ticket_id"] for r in responses}) == 1
    assert len(sim.state.created_tickets) == 1
    assert post_calls(sim) == 1


def test_a_zone_refusal_is_the_keys_answer(gw_now: Gateway, sim: Simulator) -> None:
    gw = gw_now  # the closing upstream is seen at once (not after the sweep's 5 s)
    # Zone 2 is full: the first answer for this key is the 409, and a repeat returns it
    # (DECISIONS.md: "returns the first answer and creates nothing").
    body = ticket_body(zone_id=2, service_id=201)
    first = gw.post("/api/v1/tickets", json=body, headers=KEY)
    assert first.status_code == 409
    assert first.json()["action"] == "zone_ticket_limit_reached"
    # One of zone 2's tickets is closed meanwhile: still the first answer for this key.
    active = [t for t in sim.state.dataset.tickets if t["estado"] == 1]
    next(t for t in active if t["servicio"]["zona"]["id"] == 2)["estado"] = 4
    repeat = gw.post("/api/v1/tickets", json=body, headers=KEY)
    assert repeat.status_code == 409
    assert repeat.json() == first.json()
    assert repeat.headers["idempotent-replayed"] == "true"
    assert not sim.state.created_tickets
    # A new key is a new request: the zone has room now.
    assert (
        gw.post("/api/v1/tickets", json=body, headers={"Idempotency-Key": "k-2"}).status_code == 201
    )
    # The key stays bound to its first body.
    other = gw.post("/api/v1/tickets", json=ticket_body(zone_id=3), headers=KEY)
    assert other.status_code == 422


@pytest.fixture
def lossy(data_file: Path) -> Iterator[tuple[LossyUpstream, str]]:
    app = create_simulator_app(SimulatorConfig(api_key=API_KEY, data_file=data_file))
    wrapper = LossyUpstream(app)
    with run_server(wrapper) as url:
        yield wrapper, url


@pytest.mark.parametrize("hang", [0.0, 1.5])
@pytest.mark.parametrize("headers", [KEY, {}])
def test_a_lost_answer_is_reconciled_not_duplicated(
    lossy: tuple[LossyUpstream, str],
    start_gateway: StartGateway,
    hang: float,
    headers: dict[str, str],
) -> None:
    wrapper, url = lossy
    gw = start_gateway(url, UPSTREAM_TIMEOUT_SECONDS=1.0, UPSTREAM_PAGE_SIZE=2)
    wrapper.lose, wrapper.hang = 1, hang
    body = ticket_body(zone_id=3, service_id=301)
    first = gw.post("/api/v1/tickets", json=body, headers=headers)
    # The upstream made the ticket but its answer was a 500 or never came.
    assert first.status_code == 502
    assert first.json()["meta"]["reason"] == "outcome_unknown"
    assert len(wrapper.state.created_tickets) == 1
    made = wrapper.state.created_tickets[0]["id_ticket"]
    # The repeat finds it instead of creating a second one.
    again = gw.post("/api/v1/tickets", json=body, headers=headers)
    assert again.status_code == 201, again.text
    data = again.json()["data"]
    assert data["ticket_id"] == made
    assert (data["subject"], data["status_ticket"], data["priority"]) == (
        "No Tiene Internet",
        "Nuevo",
        "3",
    )
    assert len(wrapper.state.created_tickets) == 1
    assert wrapper.state.calls["POST /api/tickets/"] == 1
    # Reconciled once: a later identical request (without a key) is a new request, which
    # the duplicate guard answers with the open ticket.
    if not headers:
        third = gw.post("/api/v1/tickets", json=body)
        assert third.status_code == 409
        assert third.json()["action"] == "ticket_already_open"
        assert third.json()["data"]["ticket_id"] == made
        assert len(wrapper.state.created_tickets) == 1
    else:
        third = gw.post("/api/v1/tickets", json=body, headers=headers)
        assert third.json() == again.json()
        assert len(wrapper.state.created_tickets) == 1


def test_an_idempotency_key_longer_than_255_is_422(gw: Gateway) -> None:
    response = gw.post(
        "/api/v1/tickets", json=ticket_body(), headers={"Idempotency-Key": "k" * 256}
    )
    assert response.status_code == 422
    assert response.json()["action"] == "validation_error"


def test_a_ticket_made_while_the_store_went_away_is_counted_and_not_made_again(
    data_file: Path, start_gateway: StartGateway
) -> None:
    """The store stops answering right after the upstream created the ticket, before the
    service recorded it (503). Zone 1 had one free slot, now taken: another request in the
    zone is refused (the zone's mark makes it read the list now, not trust a sweep from
    before the POST), and the repeat with the same key answers with the ticket made."""
    server = start_redis_server()
    assert server.process is not None
    pid = server.process.pid
    app = create_simulator_app(SimulatorConfig(api_key=API_KEY, data_file=data_file))
    wrapper = AfterTicketPost(app, hook=lambda: os.kill(pid, signal.SIGSTOP))
    try:
        with run_server(wrapper) as url:
            gw = start_gateway(url, REDIS_URL=server.url + "/0", REDIS_TIMEOUT_SECONDS=0.5)
            body = ticket_body(zone_id=1, service_id=103)
            first = gw.post("/api/v1/tickets", json=body, headers=KEY)
            assert first.status_code == 503, first.text
            assert first.json()["action"] == "store_unavailable"
            made = wrapper.state.created_tickets[0]["id_ticket"]
            os.kill(pid, signal.SIGCONT)
            other = ticket_body(zone_id=1, service_id=101, subject="Antena Dañada")
            refused = gw.post("/api/v1/tickets", json=other, headers={"Idempotency-Key": "b"})
            assert refused.status_code == 409, refused.text
            assert refused.json()["action"] == "zone_ticket_limit_reached"
            again = gw.post("/api/v1/tickets", json=body, headers=KEY)
            assert again.status_code == 201, again.text
            assert again.json()["data"]["ticket_id"] == made
            assert len(wrapper.state.created_tickets) == 1
    finally:
        os.kill(pid, signal.SIGCONT)
        server.stop()


@pytest.mark.parametrize("guard", [True, False])
def test_a_lost_answer_is_reconciled_whatever_form_the_subject_is_stored_in(
    lossy: tuple[LossyUpstream, str], start_gateway: StartGateway, guard: bool
) -> None:
    # An account stores `asunto` as "<subject> - <client name>" (UPSTREAM.md): the repeat of
    # a creation whose answer was lost still finds the ticket it made, and never makes a
    # second one (with the duplicate guard off, nothing else stands in the way).
    wrapper, url = lossy
    gw = start_gateway(url, UPSTREAM_TIMEOUT_SECONDS=1.0, DUPLICATE_TICKET_GUARD=guard)
    wrapper.lose = 1
    body = ticket_body(zone_id=3, service_id=301)
    first = gw.post("/api/v1/tickets", json=body, headers=KEY)
    assert first.json()["meta"]["reason"] == "outcome_unknown"
    made = wrapper.state.created_tickets[0]
    made["asunto"] = f"{body['subject']} - CLIENTE 301"
    again = gw.post("/api/v1/tickets", json=body, headers=KEY)
    assert again.status_code == 201, again.text
    assert again.json()["data"]["ticket_id"] == made["id_ticket"]
    assert len(wrapper.state.created_tickets) == 1
    assert wrapper.state.calls["POST /api/tickets/"] == 1


class LateUpstream(InFrontOfSimulator):
    """Sits in front of the simulator and carries out the next ticket POST only `delay`
    seconds after it arrived, whether or not the gateway is still waiting for it: a slow
    backend that makes the ticket after the gateway gave up."""

    def __init__(self, app: ASGIApp) -> None:
        super().__init__(app)
        self.late = 0
        self.delay = 0.0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not (self.ticket_post(scope) and self.late > 0):
            await self.app(scope, receive, send)
            return
        self.late -= 1
        body: list[Message] = []
        while not body or body[-1].get("more_body"):
            body.append(await receive())
        await asyncio.sleep(self.delay)

        async def replay() -> Message:
            return body.pop(0) if body else {"type": "http.disconnect"}

        async def discard(message: Any) -> None:
            return None

        await self.app(scope, replay, discard)


@pytest.fixture
def late(data_file: Path) -> Iterator[tuple[LateUpstream, str]]:
    app = create_simulator_app(SimulatorConfig(api_key=API_KEY, data_file=data_file))
    wrapper = LateUpstream(app)
    with run_server(wrapper) as url:
        yield wrapper, url


def test_a_repeat_before_a_late_ticket_shows_opens_no_second_one(
    late: tuple[LateUpstream, str], start_gateway: StartGateway
) -> None:
    # The backend makes the ticket 2.5 s after the POST; the gateway gave up at 2 s (its
    # 1 s timeout and the answer's margin) and the bot repeats at once, as the 502 invites.
    wrapper, url = late
    gw = start_gateway(url, UPSTREAM_TIMEOUT_SECONDS=1.0)
    wrapper.late, wrapper.delay = 1, 2.5
    body = ticket_body(zone_id=3, service_id=301)
    first = gw.post("/api/v1/tickets", json=body, headers=KEY)
    assert refusal(first, 502) == ("ticket_creation_failed", "outcome_unknown")
    again = gw.post("/api/v1/tickets", json=body, headers=KEY)
    # Not shown yet, and within the time the backend may still take: nothing is sent.
    assert refusal(again, 503) == ("ticket_creation_failed", "outcome_pending")
    assert 1 <= int(again.headers["Retry-After"]) <= 5
    time.sleep(1.5)  # the late ticket is made meanwhile
    third = gw.post("/api/v1/tickets", json=body, headers=KEY)
    assert third.status_code == 201, third.text
    made = wrapper.state.created_tickets
    assert len(made) == 1
    assert third.json()["data"]["ticket_id"] == made[0]["id_ticket"]


def test_a_post_the_backend_dropped_is_sent_again_once_it_cannot_show(
    sim: Simulator, start_gateway: StartGateway
) -> None:
    gw = start_gateway(sim.url, UPSTREAM_TIMEOUT_SECONDS=1.0)
    hang_ticket_posts(sim, 30)  # hangs, then 504: nothing made
    body = ticket_body(zone_id=3, service_id=301)
    first = gw.post("/api/v1/tickets", json=body, headers=KEY)
    assert refusal(first, 502) == ("ticket_creation_failed", "outcome_unknown")
    sim.state.faults.reset()
    assert refusal(gw.post("/api/v1/tickets", json=body, headers=KEY), 503)[1] == "outcome_pending"
    # Past 3 upstream timeouts and the answer's margin from the POST, it is no longer
    # waited for: the repeat opens the ticket.
    time.sleep(3.0)
    created = gw.post("/api/v1/tickets", json=body, headers=KEY)
    assert created.status_code == 201, created.text
    assert len(sim.state.created_tickets) == 1


def test_the_zones_last_slot_waits_for_a_post_that_got_no_answer(
    late: tuple[LateUpstream, str], start_gateway: StartGateway
) -> None:
    # Zone 1 has one free slot. A's POST is made 2.5 s after it left, the gateway gave up
    # at 2 s; B, another customer of the zone, asks at once: the slot may be A's, so B is
    # not opened on a list that does not show A's ticket yet (the cap holds).
    wrapper, url = late
    gw = start_gateway(url, UPSTREAM_TIMEOUT_SECONDS=1.0)
    wrapper.late, wrapper.delay = 1, 2.5
    first = gw.post("/api/v1/tickets", json=ticket_body(zone_id=1, service_id=103))
    assert refusal(first, 502) == ("ticket_creation_failed", "outcome_unknown")
    other = ticket_body(zone_id=1, service_id=102, subject="Antena Dañada")
    busy = gw.post("/api/v1/tickets", json=other)
    assert refusal(busy, 503) == ("ticket_creation_failed", "zone_busy")
    time.sleep(1.5)  # A's ticket is made meanwhile
    full = gw.post("/api/v1/tickets", json=other)
    assert full.status_code == 409, full.text
    assert full.json()["action"] == "zone_ticket_limit_reached"
    assert len(wrapper.state.created_tickets) == 1
