"""(d) accounts: load the pending-invoice list and index it, then answer accounts in-process.

50,000 clients with 20,000 pending invoices in the simulator. The load goes through the
service's own path (AccountService's cached resource: every page, mapping, the index in a
worker thread), beside the upstream's own time for the same pages. Account answers are
timed once both lists are warm, envelope rendering included, without HTTP.
"""

from __future__ import annotations

import asyncio
import random
import statistics
import time
from datetime import date, timedelta
from typing import Any

import httpx

from bench import procs
from bench.indexing import _percentile, service_parts
from isp_gateway.accounts.service import AccountService
from isp_gateway.clients.service import ClientService
from isp_gateway.payments.ledger import PromiseLedger
from isp_gateway.simulator import (
    SimulatorConfig,
    SimulatorState,
    build_dataset,
    create_simulator_app,
)
from isp_gateway.web.envelope import respond, success

PAGE_SIZE = 500
PARALLEL = 4


def _pending(clients: list[dict[str, Any]], count: int, rng: random.Random) -> list[dict[str, Any]]:
    today = date.today()
    rows = []
    for number in range(count):
        client = rng.choice(clients)
        issued = today - timedelta(days=rng.randrange(90))
        total: Any = f"{rng.randint(20, 150) * 1000}.00"
        rows.append(
            {
                "id_factura": 100_000 + number,
                "cliente": {"usuario": client["usuario"], "nombre": client["nombre"]},
                "total": float(total) if number % 3 == 0 else total,
                "fecha_emision": issued.isoformat(),
                "fecha_vencimiento": (issued + timedelta(days=15)).isoformat(),
                "estado": 1,
            }
        )
    return rows


async def _raw_fetch(url: str) -> float:
    """The upstream's own time: the same pages, same parallelism, no parsing beyond JSON."""
    headers = {"Authorization": f"Api-Key {procs.API_KEY}"}
    path = "/api/facturas/"
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:
        started = time.perf_counter()
        params = {"estado": 1, "limit": PAGE_SIZE}
        first = (await http.get(path, params=params)).json()
        sem = asyncio.Semaphore(PARALLEL)

        async def page(offset: int) -> None:
            async with sem:
                (await http.get(path, params={**params, "offset": offset})).json()

        await asyncio.gather(*(page(o) for o in range(PAGE_SIZE, first["count"], PAGE_SIZE)))
        return time.perf_counter() - started


async def _service(url: str, sample: list[int], rounds: int) -> tuple[float, int, list[float]]:
    async with service_parts(url) as parts:
        clients = ClientService(parts)
        # As services.py builds it: the account reads the payment-promise ledger too.
        ledger = PromiseLedger(parts.store, parts.settings)
        accounts = AccountService(parts, clients=clients, promises=ledger)
        started = time.perf_counter()
        await accounts.invoices.refresh()
        load = time.perf_counter() - started
        index = accounts.invoices.local
        assert index is not None
        await clients.cache.refresh()
        for service_id in sample[:200]:  # warm
            await accounts.account(str(service_id))
        samples: list[float] = []
        for _ in range(rounds):
            for service_id in sample:
                started = time.perf_counter()
                account = await accounts.account(str(service_id))
                respond(200, success("account_found", account.data))
                samples.append((time.perf_counter() - started) * 1000)
        await clients.aclose()
        await accounts.aclose()
        return load, index.count, samples


def run(*, clients: int = 50_000, invoices: int = 20_000) -> None:
    from tests.support import run_server

    print(
        f"(d) accounts: {clients:,} clients, {invoices:,} pending invoices "
        f"(page size {PAGE_SIZE}, {PARALLEL} pages in parallel)"
    )
    rng = random.Random(11)
    config = SimulatorConfig(api_key=procs.API_KEY, clients=1, seed=7)
    app = create_simulator_app(config)
    dataset = build_dataset(clients, 7, tickets=0)
    dataset.invoices = _pending(dataset.clients, invoices, rng)
    app.state.sim = SimulatorState(config, dataset)
    # Clients that are not suspended or cancelled: their answers need no confirming read,
    # which is what "once warm" measures.
    sample = [
        c["id_servicio"]
        for c in rng.sample(dataset.clients, 3000)
        if c["estado"] not in ("Suspendido", "Cancelado")
    ]
    with run_server(app) as url:
        asyncio.run(_raw_fetch(url))  # let the simulator warm up
        upstream_time = min(asyncio.run(_raw_fetch(url)) for _ in range(2))
        load, count, samples = asyncio.run(_service(url, sample, rounds=3))
    assert count == invoices, count
    print(f"    upstream's own time (raw pages)      {upstream_time:6.2f} s")
    print(f"    service load: fetch + map + index    {load:6.2f} s")
    print(f"    beyond the upstream's own time       {load - upstream_time:6.2f} s (target < 2 s)")
    print(
        f"    account answer, warm, in-process     n={len(samples)}  "
        f"p50 {statistics.median(samples):.3f} ms  p99 {_percentile(samples, 0.99):.3f} ms  "
        f"max {max(samples):.3f} ms  (target p99 < 2 ms)"
    )
