"""Who may move money (MONEY.md 1-3): the scopes payments:promise and payments:report, and
always a verification of that service by this caller and end user, whatever
REQUIRE_VERIFICATION says. Tried as a talked-into-it bot would: no id, another service's,
another end user's, another caller's, junk."""

from __future__ import annotations

from pathlib import Path

import pytest

from isp_gateway.auth.keys import generate_key, new_entry, write_key_entries
from tests.payments.conftest import (
    DEBTORS,
    REPORT,
    StartMoney,
    audit_events,
    day,
    mcp_verify,
    png_file,
    promise,
    report,
    report_fields,
    sim_promises,
    sim_reports,
    verification_id,
)

PNG = ("recibo.png", png_file(), "image/png")


def assert_refused(answer: object) -> None:
    assert getattr(answer, "status_code", None) == 403, getattr(answer, "text", answer)
    body = answer.json()  # type: ignore[attr-defined]
    assert (body["type"], body["action"]) == ("error", "verification_required")


@pytest.mark.parametrize("policy", [False, True], ids=["policy-off", "policy-on"])
def test_money_never_moves_for_a_customer_nobody_verified(
    start_money: StartMoney, policy: bool
) -> None:
    sim, gw = start_money(REQUIRE_VERIFICATION=policy)
    sid, other = DEBTORS[0], DEBTORS[1]
    mine = verification_id(gw, sid, end_user="alice")
    someone_elses = verification_id(gw, other, end_user="alice")
    for headers_id, end_user in [
        (None, "alice"),  # no id
        (someone_elses, "alice"),  # another service's
        (mine, "bob"),  # the right service, another end user of the bot
        (mine, None),  # ... or the bot itself
        ("", "alice"),
        ("ver_", "alice"),
        ("ver_" + "x" * 300, "alice"),
        (mine + "x", "alice"),
        ("not-an-id", "alice"),
    ]:
        assert_refused(promise(gw, sid, headers_id, end_user=end_user))
        assert_refused(report(gw, sid, headers_id, PNG, end_user=end_user))
    assert sim_promises(sim) == [] and sim_reports(sim) == []
    assert sim.state.calls["POST /api/promesa-pago/"] == 0
    # Each refusal is audited, counted per caller and minute (CALLERS.md 6: refusals cannot
    # flush the audit); the ids never are.
    refusals = audit_events(gw, "verification_required")
    assert sum(e["details"].get("count", 1) for e in refusals) == 18
    assert {e["service_id"] for e in refusals} == {sid}
    assert mine not in str(refusals)
    # The right id, for the end user who verified: both go through.
    assert promise(gw, sid, mine, end_user="alice").status_code == 201
    assert report(gw, sid, mine, PNG, end_user="alice").status_code == 202


def test_a_bad_service_id_is_still_its_400(start_money: StartMoney) -> None:
    _, gw = start_money()
    vid = verification_id(gw, DEBTORS[0])
    for path in ("/api/v1/clients/12ab/payment-promise", "/api/v1/clients/0/payment-reports"):
        answer = gw.post(path, json={"until": "2030-01-01"}, headers={"X-Verification-Id": vid})
        assert (answer.status_code, answer.json()["action"]) == (400, "invalid_service_id")


def test_each_route_has_its_own_scope(start_money: StartMoney, tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    promiser, reporter = generate_key(), generate_key()
    write_key_entries(
        path,
        [
            new_entry(promiser, "promiser", ["clients:verify", "payments:promise"], None),
            new_entry(reporter, "reporter", ["clients:verify", "payments:report"], None),
        ],
    )
    sim, gw = start_money(API_KEYS_FILE=str(path))
    sid = DEBTORS[2]
    as_promiser = {"X-API-Key": promiser}
    as_reporter = {"X-API-Key": reporter}
    body = {"name": f"CLIENTE {sid}", "address": "CALLE 1 # 2-3", "internet_plan_name": "PLAN 10MB"}

    def verify(headers: dict[str, str]) -> str:
        answer = gw.client.post(f"/api/v1/clients/{sid}/verify", json=body, headers=headers)
        assert answer.status_code == 200, answer.text
        data = answer.json()["data"]
        if "verification_id" in data:
            return str(data["verification_id"])
        return mcp_verify(gw, sid, headers)

    promiser_id = verify(as_promiser)
    reporter_id = verify(as_reporter)
    # The reporter may not promise, the promiser may not report.
    wrong = gw.client.post(
        f"/api/v1/clients/{sid}/payment-promise",
        json={"until": "2030-01-01"},
        headers={**as_reporter, "X-Verification-Id": reporter_id},
    )
    assert (wrong.status_code, wrong.json()["data"]) == (403, {"required": "payments:promise"})
    wrong = gw.client.post(
        REPORT.format(sid),
        files={"receipt": PNG},
        headers={**as_promiser, "X-Verification-Id": promiser_id},
    )
    assert (wrong.status_code, wrong.json()["data"]) == (403, {"required": "payments:report"})
    # One caller's verification is not another's, the JWT user's included.
    assert_refused(promise(gw, sid, promiser_id))
    assert sim_promises(sim) == [] and sim_reports(sim) == []
    # Each key with its own scope and its own verification: both go through.
    made = gw.client.post(
        f"/api/v1/clients/{sid}/payment-promise",
        json={"until": day(2)},
        headers={**as_promiser, "X-Verification-Id": promiser_id},
    )
    assert made.status_code == 201, made.text
    filed = gw.client.post(
        REPORT.format(sid),
        data=report_fields(),
        files={"receipt": PNG},
        headers={**as_reporter, "X-Verification-Id": reporter_id},
    )
    assert filed.status_code == 202, filed.text
    events = audit_events(gw, "payment_promise") + audit_events(gw, "payment_report")
    assert {(e["event"], e["caller"]) for e in events} == {
        ("payment_promise", "promiser"),
        ("payment_report", "reporter"),
    }
