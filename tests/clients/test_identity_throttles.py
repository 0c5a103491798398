"""Identity attempts (CALLERS.md 2): verify and resolve failures on three counters, per
(service, end user), per end user on every service, per service for everyone; X-End-User-Id
keeps one person's failures from locking another out. Hostile callers: many services,
reworded names, alternating verify and resolve, a distributed guess, two workers."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.clients.conftest import StartPair
from tests.clients.test_verify_update import GOOD
from tests.conftest import Gateway, StartGateway

REDIS_DB = 4
JOSE = {"name": "jose perez", "address": "calle 5", "internet_plan_name": "plan 10mb"}
WRONG = {**GOOD, "name": "Pedro"}
WRONG_RESOLVE = {**GOOD, "internet_plan_name": "PLAN 5MB"}
# Roomy defaults so each test exercises one counter.
ROOMY = {
    "VERIFY_MAX_FAILURES": 50,
    "VERIFY_END_USER_MAX_FAILURES": 50,
    "VERIFY_SERVICE_MAX_FAILURES": 50,
    "VERIFY_LOCKOUT_SECONDS": 60,
}


def _as(user: str | None) -> dict[str, str]:
    return {"X-End-User-Id": user} if user is not None else {}


def verify(gw: Gateway, service_id: int, payload: dict[str, Any], user: str | None) -> str:
    response = gw.post(f"/api/v1/clients/{service_id}/verify", json=payload, headers=_as(user))
    return _outcome(response)


def resolve(gw: Gateway, payload: dict[str, Any], user: str | None) -> str:
    response = gw.post("/api/v1/clients/resolve", json=payload, headers=_as(user))
    return _outcome(response)


def _outcome(response: Any) -> str:
    action: str = response.json()["action"]
    if action == "client_verification_locked":
        assert response.status_code == 429
        assert 1 <= int(response.headers["Retry-After"]) <= 60
    return action


LOCKED = "client_verification_locked"
VERIFIED = "client_verified"
FAILED = "client_verification_failed"


def test_the_pair_counter_locks_that_pair_only(start_pair: StartPair) -> None:
    _, gw = start_pair(**{**ROOMY, "VERIFY_MAX_FAILURES": 2})
    for _ in range(2):
        assert verify(gw, 101, WRONG, "alice") == FAILED
    assert verify(gw, 101, GOOD, "alice") == LOCKED  # even the right answer
    assert verify(gw, 101, GOOD, "bob") == VERIFIED  # another person, same customer
    assert verify(gw, 107, JOSE, "alice") == VERIFIED  # same person, another customer
    assert verify(gw, 101, GOOD, None) == VERIFIED  # the bot itself, without the header


def test_the_end_user_counter_spans_every_service(start_pair: StartPair) -> None:
    _, gw = start_pair(**{**ROOMY, "VERIFY_END_USER_MAX_FAILURES": 3})
    # One wrong guess on each of three services: no pair reaches its lock...
    for service_id in (101, 103, 104):
        assert verify(gw, service_id, WRONG, "mallory") == FAILED
    # ...but the person is locked on any service, and for resolve too.
    assert verify(gw, 107, JOSE, "mallory") == LOCKED
    assert resolve(gw, GOOD, "mallory") == LOCKED
    # Nobody else is.
    assert verify(gw, 107, JOSE, "alice") == VERIFIED
    assert resolve(gw, GOOD, "alice") == VERIFIED


def test_alternating_verify_and_resolve_gains_nothing(start_pair: StartPair) -> None:
    _, gw = start_pair(**{**ROOMY, "VERIFY_END_USER_MAX_FAILURES": 4})
    for _ in range(2):
        assert verify(gw, 101, WRONG, "mallory") == FAILED
        assert resolve(gw, WRONG_RESOLVE, "mallory") == FAILED
    assert resolve(gw, GOOD, "mallory") == LOCKED
    assert verify(gw, 101, GOOD, "mallory") == LOCKED


def test_a_reworded_resolve_counts_once_per_attempt(start_pair: StartPair) -> None:
    # Issue 17: the counter was keyed on the name's exact words; reordering, repeating or
    # dropping words gave 40 wrong guesses on one customer.
    _, gw = start_pair(**{**ROOMY, "VERIFY_END_USER_MAX_FAILURES": 5})
    names = ["Juan Perez", "Perez Juan", "Juan Juan Perez", "Juan", "Perez", "JUAN  PÉREZ",
             "Carlos Juan Perez", "Gomez Perez", "perez perez juan", "Juan Carlos"]  # fmt: skip
    outcomes = [resolve(gw, {**WRONG_RESOLVE, "name": name}, "mallory") for name in names]
    assert outcomes.count(LOCKED) == 5, outcomes
    assert LOCKED not in outcomes[:5], outcomes
    # By address (no name) is the same person's counter.
    by_address = {"address": "Vereda el Rosal", "internet_plan_name": "plan 10mb",
                  "internet_plan_price": 40000.5}  # fmt: skip
    assert resolve(gw, by_address, "mallory") == LOCKED
    assert resolve(gw, GOOD, "alice") == VERIFIED


def test_the_service_counter_stops_a_distributed_guess(start_pair: StartPair) -> None:
    _, gw = start_pair(**{**ROOMY, "VERIFY_SERVICE_MAX_FAILURES": 3})
    for n in range(3):  # three people, one wrong guess each, on one customer
        assert verify(gw, 101, WRONG, f"sock-{n}") == FAILED
    assert verify(gw, 101, GOOD, "alice") == LOCKED  # for everyone on that service
    assert verify(gw, 101, GOOD, None) == LOCKED
    assert resolve(gw, GOOD, "alice") == LOCKED  # resolve would verify it: locked too
    assert verify(gw, 107, JOSE, "alice") == VERIFIED  # other services are served


def test_rotating_end_users_on_resolve_meets_the_service_counter(start_pair: StartPair) -> None:
    # A hostile bot inventing a new X-End-User-Id for every guess: a failed resolve whose
    # words name one customer counts on that service's backstop counter.
    _, gw = start_pair(**{**ROOMY, "VERIFY_SERVICE_MAX_FAILURES": 3})
    guess = {**JOSE, "internet_plan_name": "PLAN 5MB"}
    for n in range(3):
        assert resolve(gw, guess, f"sock-{n}") == FAILED
    assert resolve(gw, JOSE, "sock-9") == LOCKED
    assert verify(gw, 107, JOSE, "alice") == LOCKED
    # Words naming several customers (the twins) lock none of them for everyone.
    twins = {"name": "Rosa Diaz", "address": "El Porvenir", "internet_plan_name": "PLAN 5MB"}
    for n in range(5):
        assert resolve(gw, twins, f"sock-{n}") == FAILED
    rosa = {"name": "Rosa Diaz", "address": "El Porvenir", "internet_plan_name": "plan 10mb"}
    assert verify(gw, 105, rosa, "alice") == VERIFIED


def test_a_success_resets_the_pair_only(start_pair: StartPair) -> None:
    _, gw = start_pair(**{**ROOMY, "VERIFY_MAX_FAILURES": 2, "VERIFY_END_USER_MAX_FAILURES": 3})
    assert verify(gw, 101, WRONG, "mallory") == FAILED
    assert verify(gw, 101, GOOD, "mallory") == VERIFIED  # the pair starts again...
    assert verify(gw, 101, WRONG, "mallory") == FAILED
    assert verify(gw, 101, GOOD, "mallory") == VERIFIED  # ...so it never locks,
    assert verify(gw, 107, WRONG, "mallory") == FAILED
    # ...but the person's three failures stand: the successes did not wipe them.
    assert verify(gw, 107, JOSE, "mallory") == LOCKED


def test_resolve_cannot_verify_a_locked_pair(start_pair: StartPair) -> None:
    # Issue 17: a correct resolve verified a customer while verify was locked.
    _, gw = start_pair(**{**ROOMY, "VERIFY_MAX_FAILURES": 2})
    for _ in range(2):
        assert verify(gw, 101, WRONG, "mallory") == FAILED
    assert resolve(gw, GOOD, "mallory") == LOCKED
    assert resolve(gw, GOOD, "alice") == VERIFIED


def test_resolve_success_resets_its_pair(start_pair: StartPair) -> None:
    _, gw = start_pair(**{**ROOMY, "VERIFY_MAX_FAILURES": 2})
    assert verify(gw, 101, WRONG, "alice") == FAILED
    assert resolve(gw, GOOD, "alice") == VERIFIED
    assert verify(gw, 101, WRONG, "alice") == FAILED  # one failure since the success
    assert verify(gw, 101, GOOD, "alice") == VERIFIED


def test_an_unknown_service_or_ambiguity_is_no_failure(start_pair: StartPair) -> None:
    _, gw = start_pair(
        **{**ROOMY, "VERIFY_END_USER_MAX_FAILURES": 1, "VERIFY_SERVICE_MAX_FAILURES": 1}
    )
    for _ in range(3):
        assert verify(gw, 999, GOOD, "alice") == "client_not_found"
    twins = {"name": "Rosa Diaz", "address": "El Porvenir", "internet_plan_name": "plan 10mb"}
    for _ in range(3):
        assert resolve(gw, twins, "alice") == "client_ambiguous"
    assert verify(gw, 101, GOOD, "alice") == VERIFIED


def test_counters_hold_across_two_workers_on_redis(
    start_pair: StartPair, start_gateway: StartGateway, shared_redis: str
) -> None:
    settings = {
        **ROOMY,
        "REDIS_URL": shared_redis,
        "VERIFY_MAX_FAILURES": 3,
        "VERIFY_END_USER_MAX_FAILURES": 5,
    }
    sim, first = start_pair(**settings)
    second = start_gateway(sim.url, **settings)
    workers = (first, second)
    # Twelve parallel wrong guesses by one person on one customer, over both workers: only
    # three are compared with the record.
    with ThreadPoolExecutor(12) as pool:
        outcomes = list(
            pool.map(
                lambda n: verify(workers[n % 2], 101, {**GOOD, "name": f"Pedro {n}"}, "mallory"),
                range(12),
            )
        )
    assert outcomes.count(FAILED) == 3, outcomes
    assert outcomes.count(LOCKED) == 9, outcomes
    # The person's counter is shared too: two more failures elsewhere lock them anywhere.
    assert resolve(second, WRONG_RESOLVE, "mallory") == FAILED
    assert verify(first, 104, WRONG, "mallory") == FAILED
    for worker in workers:
        assert verify(worker, 107, JOSE, "mallory") == LOCKED
        assert verify(worker, 101, GOOD, "alice") == VERIFIED
