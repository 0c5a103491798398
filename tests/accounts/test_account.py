"""GET /api/v1/clients/{id}/account: what the customer owes, from the cached pending list."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from isp_gateway.simulator import Variants
from tests.accounts.conftest import StartAccounts, day, warm_invoices
from tests.clients.conftest import wait_for_list_age
from tests.conftest import Gateway, Simulator
from tests.support import wait_until


def test_account_lists_pending_invoices_oldest_due_first(start_accounts: StartAccounts) -> None:
    _, gw = start_accounts()
    response = gw.get("/api/v1/clients/202/account")
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is True and body["type"] == "success"
    assert body["action"] == "account_found"
    assert body["meta"] is None
    data = body["data"]
    assert data["service_id"] == 202
    assert data["service_state"] == "suspended"
    assert data["invoice_status"] == "Vencidas"
    assert data["balance"] == 92500.5
    assert data["cut_off_date"] == "2026-03-05"
    assert [i["invoice_id"] for i in data["pending_invoices"]] == [9003, 9002, 9009, 9004]
    first = data["pending_invoices"][0]
    assert first == {
        "invoice_id": 9003,
        "total": 40000.0,
        "issued_on": day(-75),
        "due_on": day(-60),
        "overdue": True,
    }
    overdue = {i["invoice_id"]: i["overdue"] for i in data["pending_invoices"]}
    assert overdue == {9003: True, 9002: True, 9009: False, 9004: False}
    assert data["total_due"] == 92501.5
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", data["as_of"])


def calls(sim: Simulator, key: str) -> int:
    return int(sim.state.calls[key])


def test_warm_account_answers_make_no_upstream_call(start_accounts: StartAccounts) -> None:
    sim, gw = start_accounts()
    for service_id in (201, 202, 203, 205, 206):
        assert gw.get(f"/api/v1/clients/{service_id}/account").status_code == 200
    assert sim.state.stats()["total"] == 0


def test_the_pending_list_is_read_whole_every_page(start_accounts: StartAccounts) -> None:
    sim, gw = start_accounts(reset_stats=False)
    # 8 pending rows at 2 a page: one load is 4 pages (the last holds beto's 9009), and one
    # page of the invoices in review (none here).
    assert gw.runtime.services.accounts.invoices.loads == 1
    assert calls(sim, "GET /api/facturas/") == 5
    data = gw.get("/api/v1/clients/202/account").json()["data"]
    assert 9009 in [i["invoice_id"] for i in data["pending_invoices"]]


def test_paid_and_free_clients_owe_nothing(start_accounts: StartAccounts) -> None:
    _, gw = start_accounts()
    data = gw.get("/api/v1/clients/201/account").json()["data"]
    assert data["service_state"] == "active"
    assert data["invoice_status"] == "Pagadas"
    assert (data["pending_invoices"], data["total_due"], data["balance"]) == ([], 0, 0.0)
    free = gw.get("/api/v1/clients/206/account").json()["data"]
    assert (free["service_state"], free["total_due"]) == ("free", 0)


def test_a_row_of_nobody_is_ignored_and_totals_read_both_ways(
    start_accounts: StartAccounts,
) -> None:
    _, gw = start_accounts()
    carla = gw.get("/api/v1/clients/203/account").json()["data"]
    assert [(i["invoice_id"], i["total"], i["overdue"]) for i in carla["pending_invoices"]] == [
        (9005, 55000.0, False)
    ]
    index = gw.runtime.services.accounts.invoices.local
    assert "nobody@isp" in index  # read, but no client ever matches it
    elena = gw.get("/api/v1/clients/205/account").json()["data"]
    assert (elena["service_state"], elena["total_due"]) == ("cancelled", 30000.0)


def test_totals_as_json_numbers(start_accounts: StartAccounts) -> None:
    _, gw = start_accounts({"variants": Variants(money="number")})
    data = gw.get("/api/v1/clients/202/account").json()["data"]
    assert data["total_due"] == 92501.5


@pytest.mark.parametrize(
    ("raw", "status", "action"),
    [
        ("abc", 400, "invalid_service_id"),
        ("-5", 400, "invalid_service_id"),
        ("2.5", 400, "invalid_service_id"),
        ("%20", 400, "invalid_service_id"),
        ("999", 404, "client_not_found"),
    ],
)
def test_bad_and_unknown_service_ids(
    start_accounts: StartAccounts, raw: str, status: int, action: str
) -> None:
    _, gw = start_accounts()
    response = gw.get(f"/api/v1/clients/{raw}/account")
    assert response.status_code == status
    body = response.json()
    assert (body["ok"], body["type"], body["action"], body["data"]) == (
        False,
        "error",
        action,
        None,
    )


def test_an_unreadable_total_is_a_502_for_that_client_only(
    start_accounts: StartAccounts, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="isp_gateway.upstream.invoices")
    _, gw = start_accounts(wait_invoices=False)
    warm_invoices(gw)
    response = gw.get("/api/v1/clients/204/account")
    assert response.status_code == 502
    body = response.json()
    assert body["action"] == "upstream_unavailable"
    # Spanish by default (MESSAGES_LANGUAGE): "No se puede confirmar el saldo".
    assert "no se puede confirmar el saldo" in body["message"].lower()
    assert gw.get("/api/v1/clients/202/account").status_code == 200
    assert any("invoice 9007" in r.getMessage() for r in caplog.records)


def assert_balance_unconfirmed(gw: Gateway, *service_ids: int) -> None:
    """Each account answers 502: the balance cannot be confirmed (never "owes nothing")."""
    for service_id in service_ids:
        response = gw.get(f"/api/v1/clients/{service_id}/account")
        assert response.status_code == 502, response.text
        body = response.json()
        assert body["action"] == "upstream_unavailable"
        assert body["message"].startswith("No se puede confirmar el saldo ahora")
        assert body["data"] is None


def test_a_read_cut_off_on_a_later_page_is_never_owes_nothing(
    start_accounts: StartAccounts,
) -> None:
    def fail_later_pages(sim: Simulator) -> None:
        # The first page answers; every later page of the invoice list fails.
        sim.state.faults.update(
            {
                "error_rate": 1.0,
                "scopes": {"error_rate": {"path_prefix": "/api/facturas/", "min_offset": 2}},
            }
        )

    # The requests join the start-up load, whose failing pages are retried in the background
    # before it gives up: short waits between those attempts (default 2, 4 and 8 s).
    sim, gw = start_accounts(
        wait_invoices=False, before_gateway=fail_later_pages, UPSTREAM_PAGE_RETRY_SECONDS=0.05
    )
    assert_balance_unconfirmed(gw, 201, 202)
    # Pages were read (the first answered, the later ones failed), yet nothing was kept.
    assert calls(sim, "GET /api/facturas/") >= 2
    assert gw.runtime.services.accounts.invoices.local is None


@pytest.mark.parametrize("min_offset", [0, 2])
def test_a_short_read_of_the_pending_list_is_never_owes_nothing(
    start_accounts: StartAccounts, min_offset: int
) -> None:
    """Issue 17: a page answering 200 with fewer rows than asked and `next: null` before the
    announced `count` (the first page, or a later one) is a failed read, not the whole list."""

    def short_pages(sim: Simulator) -> None:
        sim.state.faults.update(
            {
                "short_page": True,
                "scopes": {
                    "short_page": {"path_prefix": "/api/facturas/", "min_offset": min_offset}
                },
            }
        )

    sim, gw = start_accounts(
        wait_invoices=False, before_gateway=short_pages, UPSTREAM_PAGE_RETRY_SECONDS=0.05
    )
    # Suspended with four pending invoices; and another.
    assert_balance_unconfirmed(gw, 202, 201)
    assert calls(sim, "GET /api/facturas/") >= 1
    assert gw.runtime.services.accounts.invoices.local is None
    # The backend answers whole again: the same customer owes what they owe.
    sim.state.faults.reset()
    response = gw.get("/api/v1/clients/202/account")
    assert response.status_code == 200
    assert response.json()["data"]["total_due"] == 92501.5


def test_an_older_complete_copy_answers_stale_during_an_outage(
    start_accounts: StartAccounts,
) -> None:
    sim, gw = start_accounts(INVOICE_CACHE_SECONDS=1)
    sim.state.faults.update(
        {
            "error_rate": 1.0,
            "scopes": {"error_rate": {"path_prefix": "/api/facturas/", "min_offset": 2}},
        }
    )

    def stale() -> dict[str, Any] | None:  # past the list's lifetime, its refresh failing
        response = gw.get("/api/v1/clients/202/account")
        assert response.status_code == 200
        answer: dict[str, Any] = response.json()
        return answer if answer["meta"] is not None else None

    body = wait_until(stale, interval=0.05, message="the stale copy to answer")
    assert body["meta"] == {"stale": True}
    assert body["data"]["total_due"] == 92501.5


def test_the_upstream_refusing_our_key_is_upstream_unauthorized(
    start_accounts: StartAccounts,
) -> None:
    def refuse_invoices(sim: Simulator) -> None:
        sim.state.faults.update(
            {"force_403": True, "scopes": {"force_403": {"path_prefix": "/api/facturas/"}}}
        )

    _, gw = start_accounts(wait_invoices=False, before_gateway=refuse_invoices)
    response = gw.get("/api/v1/clients/202/account")
    assert response.status_code == 502
    assert response.json()["action"] == "upstream_unauthorized"
    assert response.json()["data"] is None


def test_a_reactivated_client_is_not_told_they_are_suspended(
    start_accounts: StartAccounts,
) -> None:
    sim, gw = start_accounts(STATE_FRESH_SECONDS=1)
    # Staff reactivate the service upstream after the client list was cached.
    sim.state.set_client_fields(202, {"estado": "Activo", "estado_facturas": "Pagadas"})
    wait_for_list_age(gw, 1)
    data = gw.get("/api/v1/clients/202/account").json()["data"]
    assert data["service_state"] == "active"
    assert data["invoice_status"] == "Pagadas"
    assert calls(sim, "GET /api/clientes/") == 1  # one read of that one client
    # The fresh row patched the cached list: lookups say so too, without another call.
    lookup = gw.get("/api/v1/clients/by-service-id/202").json()["data"]
    assert lookup["service_state"] == "active"
    assert calls(sim, "GET /api/clientes/") == 1


def test_a_suspension_within_the_fresh_window_is_not_reread(
    start_accounts: StartAccounts,
) -> None:
    sim, gw = start_accounts()  # STATE_FRESH_SECONDS 120: the list is seconds old
    sim.state.set_client_fields(202, {"estado": "Activo"})
    data = gw.get("/api/v1/clients/202/account").json()["data"]
    assert data["service_state"] == "suspended"
    assert calls(sim, "GET /api/clientes/") == 0


def test_a_confirmed_suspension_is_trusted_for_the_window(start_accounts: StartAccounts) -> None:
    sim, gw = start_accounts(STATE_FRESH_SECONDS=2)
    wait_for_list_age(gw, 2)
    assert gw.get("/api/v1/clients/205/account").json()["data"]["service_state"] == "cancelled"
    assert calls(sim, "GET /api/clientes/") == 1
    # Asked again at once: the confirmation (kept 2 s) answers; no second read.
    assert gw.get("/api/v1/clients/205/account").json()["data"]["service_state"] == "cancelled"
    assert calls(sim, "GET /api/clientes/") == 1


def test_a_failed_confirmation_is_a_502_not_a_guess(start_accounts: StartAccounts) -> None:
    sim, gw = start_accounts(STATE_FRESH_SECONDS=1)
    wait_for_list_age(gw, 1)
    sim.state.faults.update(
        {"error_rate": 1.0, "scopes": {"error_rate": {"path_prefix": "/api/clientes/"}}}
    )
    response = gw.get("/api/v1/clients/202/account")
    assert response.status_code == 502
    assert response.json()["action"] == "upstream_unavailable"
    # An active client needs no confirmation and still answers.
    assert gw.get("/api/v1/clients/201/account").status_code == 200


def test_service_state_on_client_answers(start_accounts: StartAccounts) -> None:
    _, gw = start_accounts()
    states = {
        service_id: gw.get(f"/api/v1/clients/by-service-id/{service_id}").json()["data"][
            "service_state"
        ]
        for service_id in (201, 202, 205, 206, 207)
    }
    assert states == {
        201: "active",
        202: "suspended",
        205: "cancelled",  # "cancelado": any case
        206: "free",
        207: "unknown",  # "Retirado"
    }
    # The spec's payment_status keeps carrying estado unchanged.
    found = gw.get("/api/v1/clients/by-service-id/205").json()["data"]
    assert found["payment_status"] == "cancelado"


def test_an_answer_does_not_wait_out_a_long_first_read_of_the_list(
    start_accounts: StartAccounts,
) -> None:
    """While the first read of the pending list is still under way (minutes for a large
    ISP), an account answer says it cannot confirm the balance after one upstream call's
    time; the read goes on, and once it is done the balance is answered from it."""

    def slow_invoices(sim: Simulator) -> None:
        sim.state.faults.update(
            {"latency": 0.8, "scopes": {"latency": {"path_prefix": "/api/facturas/"}}}
        )

    _, gw = start_accounts(
        wait_invoices=False,
        before_gateway=slow_invoices,
        reset_stats=False,
        UPSTREAM_TIMEOUT_SECONDS=1.0,
    )
    response = gw.get("/api/v1/clients/202/account")
    assert response.status_code == 502
    assert response.json()["action"] == "upstream_unavailable"
    assert response.json()["message"].startswith("No se puede confirmar el saldo ahora")
    assert gw.runtime.services.accounts.invoices.loads == 0  # answered before the read was done
    warm_invoices(gw)
    answered = gw.get("/api/v1/clients/202/account")
    assert answered.status_code == 200
    assert answered.json()["data"]["total_due"] == 92501.5
    assert gw.runtime.services.accounts.invoices.loads == 1  # the waiting answer did not stop it
