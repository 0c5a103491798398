"""(e) a bot's "I have no internet" conversation on warm caches, and its upstream calls.

The simulator and the gateway run as real processes. Once the caches are warm (client list,
pending invoices, active-ticket sweep, router catalogue), a scripted conversation runs step by
step: find by phone, verify, account, diagnose, open a ticket. After each step the simulator's
`/_sim/stats` tells which upstream calls that step made. The target: no list read before the
ticket; only the ping's calls (diagnose) and the ticket's (its fresh zone count and the POST).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from typing import Any

import httpx

from bench import lookups, procs

# The whole-list reads; the target is none of them outside the ticket step.
LIST_READS = (
    "GET /api/clientes/",
    "GET /api/tickets/",
    "GET /api/facturas/",
    "GET /api/router/",
    "GET /api/plan-internet/",
    "GET /api/formas-de-pago/",
)


def _rows(upstream: str, path: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Api-Key {procs.API_KEY}"}
    rows: list[dict[str, Any]] = []
    offset = 0
    with httpx.Client(base_url=upstream, headers=headers, timeout=60) as client:
        while True:
            query = {**(params or {}), "limit": 1000, "offset": offset}
            page = client.get(path, params=query).json()
            rows.extend(page["results"])
            offset += len(page["results"])
            if not page.get("next") or not page["results"]:
                return rows


def _customer(upstream: str) -> dict[str, Any]:
    """An active customer with a phone and a plan price, on a router without an outage, in
    a zone below the default cap, with no open ticket."""
    active = _rows(upstream, "/api/tickets/", {"estado": 1})
    per_zone = Counter((t["servicio"] or {}).get("zona", {}).get("id") for t in active)
    ticketed = {(t["servicio"] or {}).get("id_servicio") for t in active}
    for row in _rows(upstream, "/api/clientes/"):
        phones = re.findall(r"\d{10,}", str(row.get("telefono") or ""))
        zone = row.get("zona") or {}
        if (
            row.get("estado") == "Activo"
            and phones
            and row.get("precio_plan") not in ("", "0.00", None)
            and zone.get("id") is not None
            and per_zone[zone["id"]] < 3
            and row["id_servicio"] not in ticketed
        ):
            return {**row, "phone": phones[0][-10:]}
    raise RuntimeError("no suitable customer in the simulated data")


def run(*, clients: int = 5_000) -> None:
    print(f"(e) bot conversation on warm caches, {clients:,} clients upstream")
    # The gateway's own log goes to a file: this part prints a table, not its access lines.
    with (
        procs.simulator(clients) as upstream,
        lookups._log_file() as (_, log),
        procs.gateway(upstream, log=log) as gw,
    ):
        customer = _customer(upstream)
        service_id = customer["id_servicio"]
        token = httpx.post(
            f"{gw.url}/api/v1/auth/token",
            data={"username": procs.USERNAME, "password": procs.PASSWORD},
        ).json()["access_token"]
        auth = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=gw.url, headers=auth, timeout=60) as bot:
            # Warm-up, as a running service is: every cache loads once (the list endpoint
            # waits for the client list; a diagnose of another customer loads the rest).
            bot.get("/api/v1/clients/").raise_for_status()
            bot.get(f"/api/v1/clients/{service_id}/account").raise_for_status()
            bot.get(f"/api/v1/clients/{service_id}/tickets").raise_for_status()
            other = service_id + 1 if service_id > 101 else service_id + 2
            bot.post(f"/api/v1/clients/{other}/diagnose", params={"wait": 0})
            httpx.put(f"{upstream}/_sim/ping-outcome", json={"duration": 1.0})
            time.sleep(1.0)
            plan = customer.get("plan_internet") or {}
            steps: list[tuple[str, str, str, dict[str, Any] | None]] = [
                ("find by phone", "GET", f"/api/v1/clients/by-phone/{customer['phone']}", None),
                (
                    "verify",
                    "POST",
                    f"/api/v1/clients/{service_id}/verify",
                    {
                        "name": customer["nombre"],
                        "address": customer["direccion"],
                        "internet_plan_name": plan.get("nombre"),
                    },
                ),
                ("account", "GET", f"/api/v1/clients/{service_id}/account", None),
                ("diagnose", "POST", f"/api/v1/clients/{service_id}/diagnose?wait=10", None),
                (
                    "open a ticket",
                    "POST",
                    "/api/v1/tickets",
                    {
                        "service_id": service_id,
                        "subject": "No Tiene Internet",
                        "description": "Sin servicio (conversación de prueba)",
                        "technician_id": (customer.get("tecnico") or {}).get("id") or 11,
                        "zone_id": customer["zona"]["id"],
                    },
                ),
            ]
            print(f"    service {service_id}; upstream calls per step (from /_sim/stats)")
            print(f"    {'step':16}{'status':>7}  {'action':28}{'ms':>8}  upstream calls")
            list_reads_before_ticket = 0
            for name, method, path, body in steps:
                httpx.post(f"{upstream}/_sim/reset-stats").raise_for_status()
                started = time.perf_counter()
                response = bot.request(method, path, json=body)
                elapsed = (time.perf_counter() - started) * 1000
                calls = httpx.get(f"{upstream}/_sim/stats").json()["calls"]
                action = response.json().get("action")
                shown = ", ".join(f"{k} x{v}" for k, v in calls.items()) or "none"
                print(
                    f"    {name:16}{response.status_code:>7}  {action!s:28}{elapsed:>8.0f}  {shown}"
                )
                if name != "open a ticket":
                    list_reads_before_ticket += sum(calls.get(k, 0) for k in LIST_READS)
    verdict = "met" if list_reads_before_ticket == 0 else "NOT met"
    print(
        f"    list reads before the ticket step: {list_reads_before_ticket} (target 0: {verdict})"
    )
