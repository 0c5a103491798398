"""A promise whose backend fails (MONEY.md 1, rule 6): a lost answer is `outcome: unknown`
and a repeat settles it from the ledger without a second promise; a refusal leaves nothing
behind; an owed list that cannot be read whole makes no promise on a guess."""

from __future__ import annotations

import time
from typing import Any

from tests.conftest import Simulator
from tests.payments.conftest import (
    DEBTORS,
    StartMoney,
    audit_events,
    day,
    oldest_invoice,
    promise,
    sim_promises,
    until_true,
    verification_id,
)
from tests.support import wait_for_age

PROMISE_ROUTE = "/api/promesa-pago/"


def fault(sim: Simulator, **faults: Any) -> None:
    sim.state.faults.update({**faults, "path_prefix": PROMISE_ROUTE})


def clear(sim: Simulator) -> None:
    sim.state.faults.update({"reset": True})


def unknown(answer: Any) -> dict[str, Any]:
    assert answer.status_code == 502, answer.text
    body: dict[str, Any] = answer.json()
    assert (body["type"], body["action"]) == ("error", "payment_promise_failed")
    assert body["meta"] == {"outcome": "unknown"}
    return body


def test_an_empty_answer_is_unknown_and_the_repeat_reconciles(start_money: StartMoney) -> None:
    # The backend made the promise (and reactivated the service); its answer was lost.
    sim, gw = start_money()
    sid = DEBTORS[0]
    vid = verification_id(gw, sid)
    fault(sim, empty_body=1.0)
    body = unknown(promise(gw, sid, vid, key="lost-1"))
    assert "no se hará un segundo acuerdo" in body["message"]
    assert len(sim_promises(sim)) == 1
    # Not shown while unconfirmed.
    assert gw.get(f"/api/v1/clients/{sid}/account").json()["data"]["promise"] is None
    clear(sim)
    again = promise(gw, sid, vid, key="lost-1")
    assert again.status_code == 201, again.text
    assert again.json()["data"]["invoice_id"] == oldest_invoice(sid)
    assert "reactivamos" in again.json()["message"]
    assert len(sim_promises(sim)) == 1  # settled from the ledger: no second promise
    account = gw.get(f"/api/v1/clients/{sid}/account").json()["data"]
    assert account["promise"] == {"until": day(3), "invoice_id": oldest_invoice(sid)}
    assert account["service_state"] == "active"
    # A third time: the idempotent replay of that answer.
    replay = promise(gw, sid, vid, key="lost-1")
    assert replay.json() == again.json() and replay.headers["Idempotent-Replayed"] == "true"
    outcomes = [
        (e["outcome"], e["details"].get("reconciled")) for e in audit_events(gw, "payment_promise")
    ]
    assert outcomes == [("failed", None), ("created", True)]
    [failed] = audit_events(gw, "payment_promise")[:1]
    assert failed["details"]["outcome"] == "unknown"
    assert "count" not in failed["details"]  # sent, and maybe made: kept one by one


def test_while_an_outcome_is_unknown_no_other_promise_is_sent(start_money: StartMoney) -> None:
    sim, gw = start_money()
    # Garbage instead of the backend's answer (the promise was not made): another request
    # for the service, another date and no key, sends nothing until it is settled.
    sid = DEBTORS[1]
    vid = verification_id(gw, sid)
    fault(sim, garbage=1.0)
    unknown(promise(gw, sid, vid, day(2)))
    clear(sim)
    other = promise(gw, sid, vid, day(4))
    unknown(other)
    assert int(other.headers["Retry-After"]) >= 1
    assert sim_promises(sim) == [] and sim.state.calls[f"POST {PROMISE_ROUTE}"] == 1
    # The first was sent (kept one by one); the repeat sent nothing (counted, CALLERS.md 6).
    events = [e for e in audit_events(gw, "payment_promise") if e["service_id"] == sid]
    assert [("count" in e["details"]) for e in events] == [False, True]
    # Made, its answer lost: another request finds it made, and it is the one active.
    sid = DEBTORS[7]
    vid = verification_id(gw, sid)
    fault(sim, empty_body=1.0)
    unknown(promise(gw, sid, vid, day(2)))
    clear(sim)
    body = promise(gw, sid, vid, day(4)).json()
    assert body["action"] == "promise_already_active"
    assert body["data"] == {"until": day(2), "invoice_id": oldest_invoice(sid)}
    assert len([p for p in sim_promises(sim) if p["id_servicio"] == sid]) == 1


def test_a_timeout_is_unknown_and_nothing_is_sent_twice(start_money: StartMoney) -> None:
    # The backend hangs (and never makes the promise): after the settling time, a repeat
    # makes it, once.
    sim, gw = start_money(UPSTREAM_TIMEOUT_SECONDS=1.0)
    sid = DEBTORS[2]
    vid = verification_id(gw, sid)
    fault(sim, hang_rate=1.0, hang_seconds=30)
    started = time.monotonic()
    unknown(promise(gw, sid, vid, key="slow-1"))
    assert time.monotonic() - started < 3.5  # within UPSTREAM_TIMEOUT_SECONDS + 2 s
    clear(sim)
    # Too soon to tell whether a slow backend will still carry it out: unknown again, with
    # the time to wait, and nothing sent.
    soon = promise(gw, sid, vid, key="slow-1")
    unknown(soon)
    assert 1 <= int(soon.headers["Retry-After"]) <= 3
    assert sim_promises(sim) == [] and sim.state.calls[f"POST {PROMISE_ROUTE}"] == 1
    # Three upstream timeouts later the service is still suspended: it was not made.
    time.sleep(3.1)
    made = promise(gw, sid, vid, key="slow-1")
    assert made.status_code == 201, made.text
    assert len(sim_promises(sim)) == 1


def test_a_late_backend_that_did_make_it_is_found(start_money: StartMoney) -> None:
    # The gateway gives up on a hung backend, which then carries the promise out after all
    # (the simulator's own state changed as that backend's would be).
    sim, gw = start_money(UPSTREAM_TIMEOUT_SECONDS=1.0)
    sid = DEBTORS[3]
    vid = verification_id(gw, sid)
    fault(sim, hang_rate=1.0, hang_seconds=30)
    unknown(promise(gw, sid, vid, key="late-1"))
    clear(sim)
    late, errors = sim.state.create_promise(
        {"id_factura": oldest_invoice(sid), "fecha_limite": day(3), "accion": 1}
    )
    assert late is not None, errors
    again = promise(gw, sid, vid, key="late-1")
    assert again.status_code == 201, again.text
    assert len(sim_promises(sim)) == 1
    assert sim.state.calls[f"POST {PROMISE_ROUTE}"] == 1


def test_a_refusal_leaves_nothing_behind(start_money: StartMoney) -> None:
    sim, gw = start_money()
    sid = DEBTORS[4]
    vid = verification_id(gw, sid)
    fault(sim, force_403=True)
    refused = promise(gw, sid, vid)
    assert (refused.status_code, refused.json()["action"]) == (502, "upstream_unauthorized")
    clear(sim)
    fault(sim, force_429=True, retry_after=9)
    limited = promise(gw, sid, vid)
    assert (limited.status_code, limited.json()["action"]) == (503, "upstream_rate_limited")
    clear(sim)
    assert sim_promises(sim) == []
    # Nothing counts against the customer: the next promise is made at once.
    assert promise(gw, sid, vid).status_code == 201
    failed = [e for e in audit_events(gw, "payment_promise") if e["outcome"] == "failed"]
    assert [e["details"]["reason"] for e in failed] == [
        "upstream_unauthorized",
        "upstream_rate_limited",
    ]
    # Nothing was made: refusals, counted (CALLERS.md 6), never one by one among the writes.
    assert all(e["details"]["count"] == 1 for e in failed)


def test_no_promise_on_an_owed_list_that_cannot_be_read(start_money: StartMoney) -> None:
    # The owed list's cache is cold and the backend fails the read: 502, nothing sent.
    sim, gw = start_money(INVOICE_CACHE_SECONDS=1, STALE_IF_ERROR_SECONDS=0)
    sid = DEBTORS[5]
    vid = verification_id(gw, sid)
    sim.state.faults.update({"error_rate": 1.0, "path_prefix": "/api/facturas/"})
    # Until the copy is past INVOICE_CACHE_SECONDS (a refresh may publish one just after
    # the faults are set); its refreshes fail meanwhile.
    wait_for_age(gw.runtime.services.accounts.invoices, 1)
    answer = promise(gw, sid, vid)
    assert (answer.status_code, answer.json()["action"]) == (502, "upstream_unavailable")
    assert sim_promises(sim) == []


def test_no_promise_on_a_stale_owed_list(start_money: StartMoney) -> None:
    # A copy served because its refresh failed is not confirmed: no promise on it.
    sim, gw = start_money(INVOICE_CACHE_SECONDS=1)
    sid = DEBTORS[6]
    vid = verification_id(gw, sid)
    sim.state.faults.update({"error_rate": 1.0, "path_prefix": "/api/facturas/"})
    time.sleep(1.2)
    # The account still answers from the old copy (stale) ...
    account = gw.get(f"/api/v1/clients/{sid}/account")
    until_true(
        lambda: gw.get(f"/api/v1/clients/{sid}/account").json()["meta"] == {"stale": True},
        "the account did not turn stale",
    )
    assert account.status_code == 200
    # ... but money does not move on it.
    answer = promise(gw, sid, vid)
    assert (answer.status_code, answer.json()["action"]) == (502, "upstream_unavailable")
    assert sim_promises(sim) == []
