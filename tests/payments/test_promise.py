"""POST /clients/{id}/payment-promise over loopback (MONEY.md 1): the promise that
reactivates, each rule in its order with its own outcome, the ledger the account and diagnose
read, the idempotency, and the audit. One gateway for the module: each test uses customers
of its own (conftest's DEBTORS), so no test reads another's ledger."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest

from isp_gateway.payments.ledger import MADE, Promise
from tests.conftest import Gateway, Pair, Simulator
from tests.payments.conftest import (
    ACTIVE_DEBTOR,
    CANCELLED,
    DEBTORS,
    OWES_NOTHING,
    TODAY,
    audit_events,
    day,
    newer_invoice,
    oldest_invoice,
    on_server,
    promise,
    sim_promises,
    verification_id,
)


@pytest.fixture(scope="module")
def pair(money_pair: Pair) -> Pair:
    return money_pair


def refused(answer: Any, status: int, action: str, kind: str = "info") -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    assert (body["ok"], body["type"], body["action"]) == (False, kind, action), body
    return body


def promises_of(sim: Simulator, service_id: int) -> list[dict[str, Any]]:
    return [p for p in sim_promises(sim) if p.get("id_servicio") == service_id]


def seed(gw: Gateway, service_id: int, *entries: Promise) -> None:
    """Promises in the gateway's ledger as if made through it earlier."""
    on_server(gw, gw.runtime.services.payments.ledger.write(service_id, list(entries)))


def made(invoice_id: int, until: int, created: int) -> Promise:
    """A promise the backend confirmed, its dates as days from today."""
    return Promise(
        invoice_id=invoice_id,
        until=TODAY + timedelta(days=until),
        created=TODAY + timedelta(days=created),
        at=time.time() + created * 86_400,
        caller="jwt:bot",
        end_user="jwt:bot",
        state=MADE,
        suspended=True,
        fingerprint="earlier",
    )


def test_a_promise_reactivates_the_service_and_the_account_shows_it(pair: Pair) -> None:
    sim, gw = pair
    sid = DEBTORS[0]
    vid = verification_id(gw, sid)
    before = gw.get(f"/api/v1/clients/{sid}/account").json()["data"]
    assert (before["service_state"], before["promise"]) == ("suspended", None)
    answer = promise(gw, sid, vid, day(3))
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert (body["ok"], body["type"], body["action"]) == (
        True,
        "success",
        "payment_promise_created",
    )
    assert body["data"] == {
        "service_id": sid,
        "invoice_id": oldest_invoice(sid),  # the oldest pending one by default
        "until": day(3),
        "amount_due": 40000.0,
        "reconnected": True,
    }
    # The sentence a bot reads: the date in words and the amount as the customer writes it.
    assert body["message"].startswith("Listo: reactivamos su servicio hasta el ")
    assert "Recuerde pagar $40.000 antes de esa fecha." in body["message"]
    # One promise upstream, with the reconnection, and the service reactivated.
    [upstream] = promises_of(sim, sid)
    assert upstream["id_factura"] == oldest_invoice(sid)
    assert (upstream["fecha_limite"], upstream["accion"]) == (f"{day(3)} 00:00", 1)
    detail = sim.state.client_detail(sid)
    assert detail is not None and detail["estado"] == "Activo"
    # The account and diagnose show the promise, and the state the backend now has, with
    # no upstream read for it.
    sim.state.reset_stats()
    account = gw.get(f"/api/v1/clients/{sid}/account").json()["data"]
    assert account["promise"] == {"until": day(3), "invoice_id": oldest_invoice(sid)}
    assert account["service_state"] == "active"
    assert sim.state.stats()["total"] == 0
    diagnosed = gw.post(f"/api/v1/clients/{sid}/diagnose?wait=0").json()["data"]
    assert diagnosed["promise"] == {"until": day(3), "invoice_id": oldest_invoice(sid)}
    [event] = [e for e in audit_events(gw, "payment_promise") if e["service_id"] == sid]
    assert (event["outcome"], event["caller"]) == ("created", "jwt:bot")
    assert event["details"]["invoice_id"] == oldest_invoice(sid)


def test_a_named_invoice_and_an_active_service(pair: Pair) -> None:
    _sim, gw = pair
    sid = DEBTORS[1]
    answer = promise(gw, sid, verification_id(gw, sid), day(5), invoice_id=newer_invoice(sid))
    assert answer.status_code == 201, answer.text
    data = answer.json()["data"]
    assert (data["invoice_id"], data["amount_due"], data["until"]) == (
        newer_invoice(sid),
        12500.5,
        day(5),  # PROMISE_MAX_DAYS ahead: the last day allowed
    )
    assert "$12.500,50" in answer.json()["message"]
    # A customer not (yet) cut may promise too: the service stays active.
    active = promise(gw, ACTIVE_DEBTOR, verification_id(gw, ACTIVE_DEBTOR), day(2))
    assert active.status_code == 201, active.text
    assert active.json()["message"].startswith("Listo: su servicio seguirá activo hasta el ")


@pytest.mark.parametrize(
    "until",
    [day(0), day(-1), day(6), day(400), "2026/11/28", "28-11-2026", "2026-02-30", 20261128, None],
)
def test_rule_1_the_date_window(pair: Pair, until: Any) -> None:
    sim, gw = pair
    sid = DEBTORS[2]
    vid = verification_id(gw, sid)
    answer = gw.post(
        f"/api/v1/clients/{sid}/payment-promise",
        json={"until": until},
        headers={"X-Verification-Id": vid},
    )
    body = refused(answer, 422, "validation_error", "error")
    assert [e["field"] for e in body["meta"]["errors"]] == ["body.until"]
    assert promises_of(sim, sid) == []


def test_rule_1_comes_before_the_service_is_read(pair: Pair) -> None:
    sim, gw = pair
    vid = verification_id(gw, CANCELLED)
    sim.state.reset_stats()
    refused(promise(gw, CANCELLED, vid, day(9)), 422, "validation_error", "error")
    assert sim.state.stats()["total"] == 0


def test_rule_2_a_cancelled_service(pair: Pair) -> None:
    sim, gw = pair
    body = refused(
        promise(gw, CANCELLED, verification_id(gw, CANCELLED)), 409, "promise_not_allowed"
    )
    assert body["data"] == {"reason": "service_cancelled"}
    assert "cancelado" in body["message"]
    assert promises_of(sim, CANCELLED) == []


def test_rule_2_a_service_gone_upstream_since_it_was_verified(
    start_money: Any,
) -> None:
    # A suspended state older than STATE_FRESH_SECONDS (0 here) is read again, and the
    # backend no longer knows the service.
    sim, gw = start_money(STATE_FRESH_SECONDS=0)
    sid = DEBTORS[3]
    vid = verification_id(gw, sid)
    sim.state.set_client_fields(sid, {"id_servicio": 999_999})
    refused(promise(gw, sid, vid), 404, "client_not_found", "error")
    assert sim_promises(sim) == []


def test_rule_3_nothing_owed_and_an_invoice_not_pending(pair: Pair) -> None:
    sim, gw = pair
    body = refused(
        promise(gw, OWES_NOTHING, verification_id(gw, OWES_NOTHING)), 409, "promise_not_allowed"
    )
    assert body["data"] == {"reason": "nothing_owed"}
    sid = DEBTORS[4]
    vid = verification_id(gw, sid)
    # Another customer's invoice, a paid one, one that does not exist.
    for invoice_id in (oldest_invoice(DEBTORS[5]), oldest_invoice(OWES_NOTHING), 123456):
        body = refused(
            promise(gw, sid, vid, invoice_id=invoice_id), 422, "invoice_not_pending", "error"
        )
        assert body["data"] == {"invoice_id": invoice_id}
    assert promises_of(sim, sid) == []


def test_rule_4_one_active_promise(pair: Pair) -> None:
    sim, gw = pair
    sid = DEBTORS[6]
    vid = verification_id(gw, sid)
    assert promise(gw, sid, vid, day(2)).status_code == 201
    # Again, for another date, for the other invoice, by another end user of the bot: no.
    other_user = verification_id(gw, sid, end_user="someone-else")
    for answer in (
        promise(gw, sid, vid, day(2)),
        promise(gw, sid, vid, day(4)),
        promise(gw, sid, vid, day(4), invoice_id=newer_invoice(sid)),
        promise(gw, sid, other_user, day(1), end_user="someone-else"),
    ):
        body = refused(answer, 409, "promise_already_active")
        assert body["data"] == {"until": day(2), "invoice_id": oldest_invoice(sid)}
        assert "vigente" in body["message"]
    assert len(promises_of(sim, sid)) == 1


def test_rule_5_a_broken_promise_bars_new_ones_for_the_cooldown(pair: Pair) -> None:
    sim, gw = pair
    sid = DEBTORS[7]
    # Promised for two days ago, made five days ago, and its invoice is still owed.
    seed(gw, sid, made(oldest_invoice(sid), until=-2, created=-5))
    body = refused(promise(gw, sid, verification_id(gw, sid)), 409, "promise_not_allowed")
    allowed_from = (TODAY + timedelta(days=28)).isoformat()  # its date + 30 days
    assert body["data"] == {"reason": "broken_promise", "allowed_from": allowed_from}
    assert "no se cumplió" in body["message"]
    # Diagnose does not offer one either: paying is what is left.
    diagnosed = gw.post(f"/api/v1/clients/{sid}/diagnose?wait=0").json()
    assert diagnosed["data"]["next_step"] == "pay"
    assert diagnosed["data"]["promise"] is None
    assert promises_of(sim, sid) == []


def test_rule_5_a_broken_promise_past_its_cooldown_no_longer_counts(pair: Pair) -> None:
    _sim, gw = pair
    sid = DEBTORS[8]
    seed(gw, sid, made(oldest_invoice(sid), until=-31, created=-35))
    assert promise(gw, sid, verification_id(gw, sid)).status_code == 201
    # A promise whose invoice was paid was kept, not broken: no cooldown.
    sid = DEBTORS[9]
    seed(gw, sid, made(77, until=-3, created=-6))
    assert promise(gw, sid, verification_id(gw, sid)).status_code == 201


def test_rule_5_at_most_two_promises_in_any_90_days(pair: Pair) -> None:
    sim, gw = pair
    sid = DEBTORS[10]
    # Two kept promises (their invoices paid since) in the last 90 days.
    seed(gw, sid, made(71, until=-77, created=-80), made(72, until=-8, created=-10))
    body = refused(promise(gw, sid, verification_id(gw, sid)), 409, "promise_not_allowed")
    # The first leaves the window 90 days after it was made.
    assert body["data"] == {
        "reason": "too_many_promises",
        "allowed_from": (TODAY + timedelta(days=10)).isoformat(),
    }
    diagnosed = gw.post(f"/api/v1/clients/{sid}/diagnose?wait=0").json()["data"]
    assert diagnosed["next_step"] == "pay"
    # One made 90 days ago has left it.
    sid = DEBTORS[11]
    seed(gw, sid, made(71, until=-87, created=-90), made(72, until=-8, created=-10))
    assert promise(gw, sid, verification_id(gw, sid)).status_code == 201
    assert promises_of(sim, DEBTORS[10]) == []


def test_diagnose_offers_a_promise_only_while_one_is_allowed(pair: Pair) -> None:
    _, gw = pair
    sid = DEBTORS[12]
    diagnosed = gw.post(f"/api/v1/clients/{sid}/diagnose?wait=0").json()
    assert (diagnosed["action"], diagnosed["data"]["next_step"]) == ("service_suspended", "promise")
    assert diagnosed["data"]["promise"] is None
    assert "acordar una fecha de pago" in diagnosed["message"]
    assert promise(gw, sid, verification_id(gw, sid)).status_code == 201
    # Reactivated: diagnose moves on to the antenna, and shows the promise.
    diagnosed = gw.post(f"/api/v1/clients/{sid}/diagnose?wait=0").json()
    assert diagnosed["data"]["service_state"] == "active"
    assert "next_step" not in diagnosed["data"]
    assert diagnosed["data"]["promise"] == {"until": day(3), "invoice_id": oldest_invoice(sid)}


def test_an_invoice_paid_meanwhile_upstream(pair: Pair) -> None:
    sim, gw = pair
    sid = DEBTORS[13]
    vid = verification_id(gw, sid)
    # Paid upstream after the gateway read the owed list: the backend refuses the promise.
    sim.state.set_invoice_state(oldest_invoice(sid), 2)
    body = refused(promise(gw, sid, vid), 409, "promise_not_allowed")
    assert body["data"] == {"reason": "nothing_owed"}
    assert promises_of(sim, sid) == []
    # Nothing was written to the ledger: the other invoice may still be promised.
    answer = promise(gw, sid, vid, invoice_id=newer_invoice(sid))
    assert answer.status_code == 201, answer.text


def test_a_replay_with_the_same_key_makes_one_upstream_call(pair: Pair) -> None:
    sim, gw = pair
    sid = DEBTORS[14]
    vid = verification_id(gw, sid)
    first = promise(gw, sid, vid, day(2), key="promise-key-1")
    again = promise(gw, sid, vid, day(2), key="promise-key-1")
    assert (first.status_code, again.status_code) == (201, 201)
    assert again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert len(promises_of(sim, sid)) == 1
    assert sim.state.calls["POST /api/promesa-pago/"] >= 1
    # The key with another body is refused; without the key the rule answers.
    body = refused(
        promise(gw, sid, vid, day(4), key="promise-key-1"), 422, "idempotency_key_reused", "error"
    )
    assert body["data"] is None
    refused(promise(gw, sid, vid, day(2)), 409, "promise_already_active")
    assert len(promises_of(sim, sid)) == 1
    created = [e for e in audit_events(gw, "payment_promise") if e["service_id"] == sid]
    # A replay is no new outcome: one `created`, then the refusal without the key.
    assert [e["outcome"] for e in created] == ["created", "refused"]


def test_every_outcome_is_audited_with_its_reason(pair: Pair) -> None:
    _, gw = pair
    first, other, broken, busy = DEBTORS[15:19]
    seed(gw, broken, made(oldest_invoice(broken), until=-2, created=-5))
    seed(gw, busy, made(71, until=-77, created=-80), made(72, until=-8, created=-10))
    vids = {sid: verification_id(gw, sid) for sid in (first, other, broken, busy)}
    vids[CANCELLED] = verification_id(gw, CANCELLED)
    vids[OWES_NOTHING] = verification_id(gw, OWES_NOTHING)
    promise(gw, first, vids[first], day(7))
    promise(gw, first, vids[first])
    promise(gw, first, vids[first])
    promise(gw, other, vids[other], invoice_id=oldest_invoice(first))
    for sid in (CANCELLED, OWES_NOTHING, broken, busy):
        promise(gw, sid, vids[sid])
    watched = {first, other, broken, busy, CANCELLED, OWES_NOTHING}
    events = [e for e in audit_events(gw, "payment_promise") if e["service_id"] in watched]
    outcomes = {(e["service_id"], e["outcome"], e["details"].get("reason")) for e in events}
    assert {
        (first, "refused", "until_out_of_range"),
        (first, "created", None),
        (first, "refused", "promise_already_active"),
        (other, "refused", "invoice_not_pending"),
        (CANCELLED, "refused", "service_cancelled"),
        (OWES_NOTHING, "refused", "nothing_owed"),
        (broken, "refused", "broken_promise"),
        (busy, "refused", "too_many_promises"),
    } <= outcomes
    # Ids and amounts only: never the verification id, a date or a name.
    text = str(events)
    assert not any(vid in text for vid in vids.values())
    assert day(3) not in text and "CLIENTE" not in text


def test_a_malformed_promise_is_counted_as_refused(pair: Pair) -> None:
    """MONEY.md 3: a promise refused is in the audit with its reason, a body or header the
    route refuses before its rules too (422 `validation_error`), counted as every refusal."""
    sim, gw = pair
    sid = DEBTORS[19]
    vid = verification_id(gw, sid)
    route = f"/api/v1/clients/{sid}/payment-promise"
    headers = {"X-Verification-Id": vid}
    malformed: list[tuple[dict[str, Any], dict[str, str], str]] = [
        ({"until": day(2) + "T00:00"}, {}, "until"),
        ({"until": day(2), "invoice_id": 0}, {}, "invoice_id"),
        ({"until": day(2), "invoice_id": "5"}, {}, "invoice_id"),
        ({}, {}, "until"),
        ({"until": day(2)}, {"Idempotency-Key": "k" * 256}, "header.Idempotency-Key"),
    ]
    for body, more, field in malformed:
        answer = gw.post(route, json=body, headers={**headers, **more})
        errors = refused(answer, 422, "validation_error", "error")["meta"]["errors"]
        assert errors[0]["field"] in (f"body.{field}", field), (body, errors)
    refused(promise(gw, sid, vid, day(30)), 422, "validation_error", "error")
    # Without the verification it is the 403, counted as such, never as a promise refused.
    refused(gw.post(route, json={"until": 5}), 403, "verification_required", "error")
    assert promises_of(sim, sid) == []
    events = [e for e in audit_events(gw, "payment_promise") if e["service_id"] == sid]
    counted: dict[str, int] = {}
    for event in events:
        assert event["outcome"] == "refused"
        reason = event["details"]["reason"]
        counted[reason] = counted.get(reason, 0) + event["details"]["count"]
    assert counted == {"validation_error": len(malformed), "until_out_of_range": 1}
    first = next(e for e in events if e["details"]["reason"] == "validation_error")
    assert first["details"]["field"] == "until"
