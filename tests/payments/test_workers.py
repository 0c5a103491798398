"""Money on `isp-gateway serve --workers 2` with a real Redis (MONEY.md 1-2): concurrent
promises for one service make exactly one upstream promise, concurrent reports of one
reference file one, and the ledger outlives a restart of the workers. Every request opens
a new connection, so either worker may answer."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from isp_gateway.auth.keys import generate_key, new_entry, write_key_entries
from isp_gateway.payments.slots import RECEIPTS_PER_CALLER
from tests.conftest import PASSWORD, USERNAME, Simulator, StartSimulator, serve_env
from tests.payments.conftest import (
    DEBTORS,
    PROMISE,
    REPORT,
    day,
    oldest_invoice,
    pdf_file,
    report_fields,
    sim_promises,
    sim_reports,
    verify_call,
)
from tests.support import serving_workers

REDIS_DB = 2
# Eight requests at once; for reports, each caller's part of a worker's receipts (below).
AT_ONCE = 2 * RECEIPTS_PER_CALLER


# A second caller (an API key): a caller holds at most RECEIPTS_PER_CALLER receipts a
# worker (payments/slots.py), so AT_ONCE reports from one caller could meet its part on one
# worker; two callers' AT_ONCE / 2 each never do, on whichever workers they land.
SECOND_BOT = generate_key()


class Served:
    def __init__(self, url: str, key: str | None = None) -> None:
        self.url = url
        if key is not None:
            self.auth = {"X-API-Key": key}
            return
        answer = httpx.post(
            f"{url}/api/v1/auth/token",
            data={"username": USERNAME, "password": PASSWORD},
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
        self.auth = {"Authorization": f"Bearer {answer.json()['access_token']}"}

    def post(self, path: str, **kw: Any) -> httpx.Response:
        headers = {**self.auth, "Connection": "close", **kw.pop("headers", {})}
        return httpx.post(self.url + path, headers=headers, timeout=30, **kw)

    def get(self, path: str, **kw: Any) -> httpx.Response:
        headers = {**self.auth, "Connection": "close", **kw.pop("headers", {})}
        return httpx.get(self.url + path, headers=headers, timeout=30, **kw)

    def verification_id(self, service_id: int) -> str:
        call = verify_call(service_id)
        answer = self.post(
            "/mcp", json=call, headers={"Accept": "application/json, text/event-stream"}
        )
        assert answer.status_code == 200, answer.text
        return str(answer.json()["result"]["structuredContent"]["verification_id"])


@pytest.fixture
def serve(
    start_simulator: StartSimulator,
    money_data: Path,
    password_hash: str,
    tmp_path: Path,
    shared_redis: str,
) -> Iterator[tuple[Simulator, Callable[[], Any]]]:
    sim = start_simulator(data_file=money_data)
    keys = tmp_path / "keys.json"
    scopes = ["clients:verify", "payments:promise", "payments:report"]
    write_key_entries(keys, [new_entry(SECOND_BOT, "second-bot", scopes, None)])
    env = serve_env(sim.url, password_hash, REDIS_URL=shared_redis, API_KEYS_FILE=str(keys))

    def start() -> Any:
        return serving_workers(env, tmp_path, "/ready")

    yield sim, start


def test_concurrent_promises_make_one_and_the_ledger_outlives_the_workers(
    serve: tuple[Simulator, Callable[[], Any]],
) -> None:
    sim, start = serve
    sid = DEBTORS[0]
    with start() as url:
        served = Served(url)
        vid = served.verification_id(sid)

        def ask(n: int) -> httpx.Response:
            # Each its own date: not one request repeated, AT_ONCE different ones.
            until = day(1 + n % 5)
            return served.post(
                PROMISE.format(sid), json={"until": until}, headers={"X-Verification-Id": vid}
            )

        with ThreadPoolExecutor(AT_ONCE) as pool:
            answers = list(pool.map(ask, range(AT_ONCE)))
        actions = Counter(a.json()["action"] for a in answers)
        assert actions == {"payment_promise_created": 1, "promise_already_active": AT_ONCE - 1}
        assert len(sim_promises(sim)) == 1
        [made] = [a.json()["data"] for a in answers if a.status_code == 201]
    # New workers on the same Redis: the promise is still there, and still the only one.
    with start() as url:
        served = Served(url)
        vid = served.verification_id(sid)
        account = served.get(f"/api/v1/clients/{sid}/account", headers={"X-Verification-Id": vid})
        assert account.json()["data"]["promise"] == {
            "until": made["until"],
            "invoice_id": oldest_invoice(sid),
        }
        again = served.post(
            PROMISE.format(sid), json={"until": day(2)}, headers={"X-Verification-Id": vid}
        )
        assert (again.status_code, again.json()["action"]) == (409, "promise_already_active")
    assert len(sim_promises(sim)) == 1


def test_concurrent_reports_of_one_reference_file_one(
    serve: tuple[Simulator, Callable[[], Any]],
) -> None:
    sim, start = serve
    sid = DEBTORS[1]
    receipt = pdf_file()
    with start() as url:
        callers = [Served(url), Served(url, SECOND_BOT)]
        vids = [caller.verification_id(sid) for caller in callers]

        def send(n: int) -> httpx.Response:
            # Half from each caller: the same transfer, whoever reports it.
            caller, vid = callers[n % 2], vids[n % 2]
            return caller.post(
                REPORT.format(sid),
                data=report_fields(reference="SAME-REF-1"),
                files={"receipt": ("r.pdf", receipt, "application/pdf")},
                headers={"X-Verification-Id": vid},
            )

        with ThreadPoolExecutor(AT_ONCE) as pool:
            answers = list(pool.map(send, range(AT_ONCE)))
        actions = Counter(a.json()["action"] for a in answers)
        assert actions == {"payment_report_received": 1, "payment_report_duplicate": AT_ONCE - 1}
    assert len(sim_reports(sim)) == 1
