"""CALLERS.md 6, limits per caller that no X-End-User-Id lifts, on `serve --workers 2` with
Redis (issue 24): a caller that guesses as a new "person" every time is locked as a caller;
a harvest by name and public plans, rotating end-user ids, gets at most
CALLER_RESOLVES_PER_HOUR customers (none at all under strict)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from itertools import count
from typing import Any

import httpx

from tests.clients.conftest import CLIENTS, StartPair
from tests.identity.conftest import Served, ServeWorkers
from tests.support import wait_until

REDIS_DB = 1
WRONG = {"name": "Pedro Picapiedra", "address": "Calle Falsa 123", "internet_plan_name": "PLAN 5MB"}
GOOD = {"name": "Juan Perez", "address": "Vereda el Rosal", "internet_plan_name": "plan 10mb"}
# Names a harvester tries (the real ones among them) with every public plan.
NAMES = [
    "JUAN CARLOS PÉREZ GÓMEZ",
    "María José Rodríguez",
    "ANA LUCÍA TORRES",
    "ROSA DÍAZ",
    "JOSÉ PEREZ",
    "CARLOS GÓMEZ",
    "LUISA FERNANDA RÍOS",
]
# What a record would give away: every name, document and phone of the data.
PERSONAL = [
    value
    for row in CLIENTS
    for value in (row["nombre"], row["cedula"], *row["telefono"].replace(";", ",").split(","))
    if value.strip()
]
_people = count()


def stranger() -> str:
    """A new X-End-User-Id for every request, as the harvest of the issue did."""
    return f"stranger-{next(_people)}"


def test_rotating_end_users_cannot_escape_the_callers_failure_limit(
    serve_workers: ServeWorkers,
) -> None:
    served = serve_workers(
        keys={"portal": ["clients:verify"]},
        CALLER_IDENTITY_FAILURES=10,
        VERIFY_LOCKOUT_SECONDS=120,
    )
    services = (101, 103, 104, 107)

    def guess(n: int) -> httpx.Response:
        sid = services[n % len(services)]
        return served.post(f"/api/v1/clients/{sid}/verify", json=WRONG, user=stranger())

    # Thirty wrong guesses at once over both workers, each from a "new person", over four
    # services: no pair, person or service counter comes near its lock; the caller's does.
    with ThreadPoolExecutor(10) as pool:
        answers = [r.json()["action"] for r in pool.map(guess, range(30))]
    assert answers.count("client_verification_failed") == 10, answers
    assert answers.count("client_verification_locked") == 20, answers
    # Locked as a caller: the right answer too, from anyone it names, and resolve as well.
    for response in (
        served.post("/api/v1/clients/101/verify", json=GOOD, user=stranger()),
        served.post("/api/v1/clients/resolve", json=GOOD, user=stranger()),
        served.post("/api/v1/clients/101/verify", json=GOOD),
    ):
        assert response.status_code == 429, response.text
        assert response.json()["action"] == "client_verification_locked"
        assert 1 <= int(response.headers["Retry-After"]) <= 120
    # Another caller is not.
    other = served.post("/api/v1/clients/101/verify", json=GOOD, key="portal", user="alice")
    assert other.json()["action"] == "client_verified"

    # One WARNING line and one audit event for the lock, whichever worker filled it.
    def flushed() -> list[dict[str, Any]] | None:
        """The caller's events once the counted refusals of both workers are flushed
        (each every second, a stalled one later): counts of at least 20 + 3."""
        params = {"caller": "jwt:bot", "limit": 500}
        found: list[dict[str, Any]] = served.get("/api/v1/audit", params=params).json()["data"]
        return found if sum(e["details"]["count"] for e in locked(found)) >= 23 else None

    def locked(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [e for e in events if e["outcome"] == "locked" and "count" in e["details"]]

    events = wait_until(flushed, message="the counted refusals of both workers")
    log = served.log.read_text()
    assert log.count("identity calls of caller 'jwt:bot' locked") == 1, log
    locks = [e for e in events if e["details"].get("counter") == "caller"]
    assert [(e["event"], e["outcome"]) for e in locks] == [("verify", "locked")]
    # The refusals are there too, counted: 20 + 3 locked identity calls (not more).
    refused = locked(events)
    assert sum(e["details"]["count"] for e in refused) == 23, refused


def test_one_caller_cannot_lock_another_callers_end_users(serve_workers: ServeWorkers) -> None:
    """X-End-User-Id is the caller's own claim: a key that names another caller's end user
    (here the other key itself, and the JWT user, each the end user of its own requests
    without the header) fills its own counters, never theirs. It locked them out before."""
    served = serve_workers(
        keys={"hostile": ["clients:verify"], "victim": ["clients:verify"]},
        VERIFY_END_USER_MAX_FAILURES=6,
        VERIFY_LOCKOUT_SECONDS=120,
    )
    for victim in ("victim", "jwt:bot"):
        # Six services (no pair comes near its five), as the victim's end user: the hostile
        # key's "person" is locked on the sixth failure.
        answers = [
            served.post(f"/api/v1/clients/{sid}/verify", json=WRONG, key="hostile", user=victim)
            for sid in (102, 103, 104, 105, 106, 107)
        ]
        assert [a.json()["action"] for a in answers] == ["client_verification_failed"] * 6
        again = served.post("/api/v1/clients/101/verify", json=GOOD, key="hostile", user=victim)
        assert again.json()["action"] == "client_verification_locked", again.text
    # Neither victim is: each verifies, and resolves, as itself.
    for key in ("victim", None):
        verified = served.post("/api/v1/clients/101/verify", json=GOOD, key=key)
        assert verified.json()["action"] == "client_verified", verified.text
        found = served.post("/api/v1/clients/resolve", json=GOOD, key=key)
        assert found.json()["action"] == "client_verified", found.text


class Harvester:
    """A stranger with the public plan catalogue: POST /resolve with every name and every
    plan (its name and price), each time as a new end user. `get` and `post` reach the
    gateway as one caller."""

    def __init__(self, get: Any, post: Any) -> None:
        self.post = post
        listed = get("/api/v1/internet-plans/").json()["data"]
        self.plans = [get(f"/api/v1/internet-plans/{p['plan_id']}").json()["data"] for p in listed]

    def resolve(self, body: dict[str, Any]) -> Any:
        return self.post("/api/v1/clients/resolve", body, stranger())

    def run(self) -> list[Any]:
        answers = []
        for name in NAMES:
            for plan in self.plans:
                body = {"name": name, "internet_plan_name": plan["name"]}
                if plan.get("price") is not None:
                    body["internet_plan_price"] = plan["price"]
                answers.append(self.resolve(body))
        return answers


def served_harvester(served: Served, key: str | None = None) -> Harvester:
    return Harvester(
        lambda path: served.get(path, key=key),
        lambda path, body, user: served.post(path, json=body, key=key, user=user),
    )


def test_a_name_harvest_gets_at_most_the_callers_quota(serve_workers: ServeWorkers) -> None:
    served = serve_workers(
        keys={"portal": ["clients:verify", "plans:read"]}, CALLER_RESOLVES_PER_HOUR=3
    )
    answers = served_harvester(served).run()
    records = [a.json()["data"] for a in answers if a.status_code == 200]
    # Five customers could be named this way (the data's twins stay ambiguous): three are.
    assert len({r["service_id"] for r in records}) == 3, records
    limited = [a for a in answers if a.json()["action"] == "identity_rate_limited"]
    assert limited, [a.json()["action"] for a in answers]
    for answer in limited:
        assert answer.status_code == 429
        assert 3500 <= int(answer.headers["Retry-After"]) <= 3600
        assert answer.json()["data"] is None
    # One already resolved within the hour is no new customer: still answered.
    again = records[0]
    body = {
        "name": again["name"],
        "internet_plan_name": again["internet_plan_name"],
        "internet_plan_price": again["internet_plan_price"],
    }
    assert served_harvester(served).resolve(body).status_code == 200
    # The quota is the caller's: another key still resolves.
    portal = served_harvester(served, key="portal")
    assert portal.resolve(body).json()["action"] == "client_verified"


def test_under_strict_a_name_harvest_gets_no_record_at_all(start_pair: StartPair) -> None:
    _, gw = start_pair(IDENTITY_POLICY="strict")

    answers = Harvester(
        gw.get,
        lambda path, body, user: gw.post(path, json=body, headers={"X-End-User-Id": user}),
    ).run()
    assert {(a.status_code, a.json()["action"]) for a in answers} == {
        (400, "client_verification_failed")
    }
    assert {tuple(a.json()["data"]["missing"]) for a in answers} == {("address",)}
    text = "\n".join(a.text for a in answers)
    for value in PERSONAL:
        assert value not in text, value
