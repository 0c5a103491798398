"""An Idempotency-Key is its caller's own (CALLERS.md 1: the caller is the credential), on a
gateway whose store is the run's real Redis: another API key sending the same key neither
gets the first key's answer replayed nor can squat a key so that the real caller's promise
is refused as a reused key. Both directions, promises and reports."""

from __future__ import annotations

from pathlib import Path

import httpx

from isp_gateway.auth.keys import generate_key, new_entry, write_key_entries
from tests.conftest import Gateway, Simulator
from tests.payments.conftest import (
    DEBTORS,
    PROMISE,
    REPORT,
    StartMoney,
    day,
    png_file,
    report_fields,
    sim_promises,
    sim_reports,
    statement_of,
)

REDIS_DB = 12
SCOPES = ["clients:verify", "payments:promise", "payments:report"]
PNG = ("r.png", png_file(), "image/png")


class Bot:
    """One API key's calls, with its own verification of each service."""

    def __init__(self, gw: Gateway, key: str) -> None:
        self.gw, self.headers = gw, {"X-API-Key": key}

    def verification_id(self, service_id: int) -> str:
        answer = self.gw.client.post(
            f"/api/v1/clients/{service_id}/verify",
            json=statement_of(service_id),
            headers=self.headers,
        )
        assert answer.status_code == 200, answer.text
        return str(answer.json()["data"]["verification_id"])

    def promise(self, service_id: int, until: str, key: str) -> httpx.Response:
        headers = {
            **self.headers,
            "X-Verification-Id": self.verification_id(service_id),
            "Idempotency-Key": key,
        }
        return self.gw.client.post(
            PROMISE.format(service_id), json={"until": until}, headers=headers
        )

    def report(self, service_id: int, key: str) -> httpx.Response:
        headers = {
            **self.headers,
            "X-Verification-Id": self.verification_id(service_id),
            "Idempotency-Key": key,
        }
        return self.gw.client.post(
            REPORT.format(service_id),
            data=report_fields(reference="TRX-42"),
            files={"receipt": PNG},
            headers=headers,
        )


def two_bots(start_money: StartMoney, tmp_path: Path, redis_url: str) -> tuple[Bot, Bot, Simulator]:
    keys = tmp_path / "keys.json"
    first, second = generate_key(), generate_key()
    write_key_entries(
        keys,
        [new_entry(first, "bot-a", SCOPES, None), new_entry(second, "bot-b", SCOPES, None)],
    )
    sim, gw = start_money(API_KEYS_FILE=str(keys), REDIS_URL=redis_url)
    return Bot(gw, first), Bot(gw, second), sim


def test_another_caller_never_gets_a_callers_replay(
    start_money: StartMoney, tmp_path: Path, shared_redis: str
) -> None:
    bot_a, bot_b, sim = two_bots(start_money, tmp_path, shared_redis)
    sid = DEBTORS[13]
    made = bot_a.promise(sid, day(2), "promise-1")
    assert made.status_code == 201, made.text
    # bot-b, verified for the same customer, the same key and body: its own request, which
    # the rules answer (a promise is active), not bot-a's answer replayed.
    theirs = bot_b.promise(sid, day(2), "promise-1")
    assert (theirs.status_code, theirs.json()["action"]) == (409, "promise_already_active")
    assert "Idempotent-Replayed" not in theirs.headers
    # bot-a's own repeat still replays its first answer.
    again = bot_a.promise(sid, day(2), "promise-1")
    assert again.headers["Idempotent-Replayed"] == "true" and again.json() == made.json()
    assert len(sim_promises(sim)) == 1
    # A report likewise: bot-b's same key and form is no replay of bot-a's 202.
    filed = bot_a.report(sid, "report-1")
    assert filed.status_code == 202, filed.text
    theirs = bot_b.report(sid, "report-1")
    assert (theirs.status_code, theirs.json()["action"]) == (409, "payment_report_duplicate")
    assert "Idempotent-Replayed" not in theirs.headers
    assert len(sim_reports(sim)) == 1


def test_no_caller_can_squat_another_callers_key(
    start_money: StartMoney, tmp_path: Path, shared_redis: str
) -> None:
    bot_a, bot_b, sim = two_bots(start_money, tmp_path, shared_redis)
    own, target = DEBTORS[14], DEBTORS[15]
    # bot-b uses, on a customer of its own, the key bot-a is about to use.
    squat = bot_b.promise(own, day(1), "promise-for-target")
    assert squat.status_code == 201, squat.text
    squat = bot_b.report(own, "report-for-target")
    assert squat.status_code == 202, squat.text
    # bot-a's real promise and report with those keys are made, not refused as reused keys.
    made = bot_a.promise(target, day(2), "promise-for-target")
    assert (made.status_code, made.json()["action"]) == (201, "payment_promise_created")
    filed = bot_a.report(target, "report-for-target")
    assert (filed.status_code, filed.json()["action"]) == (202, "payment_report_received")
    assert sorted(p["id_servicio"] for p in sim_promises(sim)) == [own, target]
    assert len(sim_reports(sim)) == 2
