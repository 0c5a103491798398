"""(i) money (issue 26): a payment promise's and a payment report's server time, and the
upstream calls each costs.

The simulator and the gateway run as real processes on loopback, with the shipped defaults
except JSON logs (the access log's `duration_ms` is the server time read here) and
REQUIRE_VERIFICATION (so a REST verify answers its `verification_id`; the money routes need
one whatever the setting). Each suspended customer who owes is verified, then makes one
promise, or files one report with a 100 KB PDF receipt, each its own customer. After each
request the simulator's `/_sim/stats` tells the upstream calls it made.

First a cold owed list: the gateway starts while the backend fails the invoice list (so its
start-up load fails), the failure clears, and the first promise reads the list whole itself.
Then the warm runs: the expected cost is the one upstream write each (and the payment
methods' one read the first time a report checks its method). Each customer is its own end
user of the bot (`X-End-User-Id`), as in a real bot, so the upstream budget's fair share per
end user is not what is measured.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import httpx

from bench import lookups, procs
from bench.agents import _cell, _token
from bench.conversation import _rows

RECEIPT_BYTES = 100 * 1024


def _debtors(upstream: str) -> list[dict[str, Any]]:
    """Suspended customers with an owed invoice, each with its oldest one."""
    owed: dict[str, list[int]] = {}
    for invoice in _rows(upstream, "/api/facturas/", {"estado": 1}):
        username = (invoice.get("cliente") or {}).get("usuario")
        if username:
            owed.setdefault(username, []).append(int(invoice["id_factura"]))
    return [
        row
        for row in _rows(upstream, "/api/clientes/")
        if str(row.get("estado", "")).casefold() == "suspendido"
        and row.get("usuario") in owed
        and row.get("nombre")
        and row.get("direccion")
        and (row.get("plan_internet") or {}).get("nombre")
    ]


def _receipt() -> bytes:
    head = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"
    return head + b"%" + b"0" * (RECEIPT_BYTES - len(head) - 2) + b"\n"


class Bot:
    def __init__(self, url: str, upstream: str) -> None:
        self.upstream = upstream
        self.http = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {_token(url)}"}, timeout=120
        )
        self.calls: dict[str, Counter[str]] = {}

    @staticmethod
    def end_user(row: dict[str, Any]) -> dict[str, str]:
        return {"X-End-User-Id": f"chat-{row['id_servicio']}"}

    def verify(self, row: dict[str, Any]) -> str:
        body = {
            "name": row["nombre"],
            "address": row["direccion"],
            "internet_plan_name": row["plan_internet"]["nombre"],
        }
        answer = self.http.post(
            f"/api/v1/clients/{row['id_servicio']}/verify", json=body, headers=self.end_user(row)
        )
        answer.raise_for_status()
        return str(answer.json()["data"]["verification_id"])

    def measured(self, label: str, method: str, path: str, **kw: Any) -> httpx.Response:
        """One request tagged `label-n`, and the upstream calls it made (by route)."""
        httpx.post(f"{self.upstream}/_sim/reset-stats").raise_for_status()
        number = sum(self.calls.get(label, Counter()).values())
        headers = {**kw.pop("headers", {}), "X-Request-ID": f"{label}-{number}"}
        response = self.http.request(method, path, headers=headers, **kw)
        calls = httpx.get(f"{self.upstream}/_sim/stats").json()["calls"]
        shown = ", ".join(f"{route} x{count}" for route, count in sorted(calls.items()))
        self.calls.setdefault(label, Counter())[shown or "none"] += 1
        return response

    def promise(self, label: str, row: dict[str, Any]) -> int:
        vid = self.verify(row)
        until = time.strftime("%Y-%m-%d", time.localtime(time.time() + 3 * 86_400))
        answer = self.measured(
            label,
            "POST",
            f"/api/v1/clients/{row['id_servicio']}/payment-promise",
            json={"until": until},
            headers={"X-Verification-Id": vid, **self.end_user(row)},
        )
        return answer.status_code

    def report(self, label: str, row: dict[str, Any], receipt: bytes, method: int) -> int:
        vid = self.verify(row)
        fields = {
            "reference": f"BENCH-{row['id_servicio']}",
            # Two days back: never in the future in the ISP's time zone (Bogotá's evening is
            # already tomorrow in UTC), and well within the days a report may name.
            "paid_on": time.strftime("%Y-%m-%d", time.localtime(time.time() - 2 * 86_400)),
            "payment_method_id": str(method),
            "amount": "40000",
        }
        answer = self.measured(
            label,
            "POST",
            f"/api/v1/clients/{row['id_servicio']}/payment-reports",
            data=fields,
            files={"receipt": ("recibo.pdf", receipt, "application/pdf")},
            headers={"X-Verification-Id": vid, **self.end_user(row)},
        )
        return answer.status_code


def run(*, clients: int = 2_000, count: int = 25) -> None:
    print(
        f"(i) money: payment promises and payment reports ({clients:,} clients), "
        f"{count} each on warm caches, one cold"
    )
    env = {"LOG_FORMAT": "json", "REQUIRE_VERIFICATION": "true"}
    receipt = _receipt()
    statuses: Counter[str] = Counter()
    with procs.simulator(clients) as upstream, lookups._log_file() as (path, log):
        debtors = _debtors(upstream)
        if len(debtors) < 2 * count + 1:
            raise RuntimeError(f"only {len(debtors)} suspended debtors in the simulated data")
        methods = _rows(upstream, "/api/formas-de-pago/")
        fault = {"error_rate": 1.0, "path_prefix": "/api/facturas/"}
        httpx.put(f"{upstream}/_sim/faults", json=fault).raise_for_status()
        with procs.gateway(upstream, log=log, **env) as gw:
            bot = Bot(gw.url, upstream)
            bot.verify(debtors[0])  # the client list has loaded; the owed list failed to
            httpx.put(f"{upstream}/_sim/faults", json={"reset": True}).raise_for_status()
            statuses[f"cold {bot.promise('cold', debtors[0])}"] += 1
            for row in debtors[1 : 1 + count]:
                statuses[f"promise {bot.promise('promise', row)}"] += 1
            method = int(methods[0]["id"])
            for row in debtors[1 + count : 1 + 2 * count]:
                statuses[f"report {bot.report('report', row, receipt, method)}"] += 1
            bot.http.close()
        times = procs.server_times(path, ok=(201, 202))
    print(f"    server time (access log), ms      {'p50':>8}{'p99':>9}{'n':>6}")
    rows = [
        ("promise, cold owed list (201)", "cold"),
        ("promise, warm (201)", "promise"),
        (f"report, {RECEIPT_BYTES // 1024} KB PDF (202)", "report"),
    ]
    for name, label in rows:
        print(f"    {name:34}{_cell(times.get(label, []))}")
    print(f"    answers: {dict(statuses)}")
    print("    upstream calls per request (from /_sim/stats), how many requests made them:")
    for label, seen in bot.calls.items():
        for shown, times_seen in seen.most_common():
            print(f"      {label:8} {times_seen:>3} x  {shown}")
