"""(b) search latency and (c) load-and-index time and memory, over 50,000 clients.

Both use the gateway's real code: the upstream module that pages through `api/clientes/`
and maps rows, and the in-process client index that lookups and search are served from.
"""

from __future__ import annotations

import asyncio
import gc
import random
import statistics
import time
import tracemalloc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from bench import procs
from isp_gateway.audit.service import AuditLog
from isp_gateway.clients.index import ClientIndex
from isp_gateway.clients.service import ClientService
from isp_gateway.kit.cache import Lists
from isp_gateway.kit.stopping import Stopping
from isp_gateway.parts import Parts
from isp_gateway.settings import Settings, load_settings
from isp_gateway.simulator import SimulatorConfig, build_dataset, create_simulator_app
from isp_gateway.store import MemoryStore
from isp_gateway.upstream import clients as upstream_clients
from isp_gateway.upstream.budget import RateBudget
from isp_gateway.upstream.gateway import UpstreamGateway, build_http_client


def _build_index(records: list[Any]) -> ClientIndex:
    return ClientIndex({"records": records}, "57", 10, ["Activo"])


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _queries(rows: list[dict[str, Any]], rng: random.Random) -> dict[str, list[str]]:
    single: list[str] = []
    multi: list[str] = []
    for row in rng.sample(rows, 300):
        words = str(row["nombre"]).split()
        single.append(rng.choice(words).lower())
        single.append(str(row["cedula"])[:5])
        multi.append(" ".join(words[:2]).lower())
        multi.append(f"{words[0]} {str(row['direccion']).split()[-1]}".lower())
    single += ["maria", "bogota", "vda", "300"]  # broad ones: many matches, worst cases
    multi += ["maria lopez", "jose garcia bogota"]
    return {"single-token": single, "multi-token": multi}


def run_search(*, clients: int) -> None:
    print(f"(b) search latency over {clients:,} clients (in-process index, limit 50)")
    dataset = build_dataset(clients, 7)
    index = _build_index(upstream_clients.map_clients(dataset.clients))
    rng = random.Random(3)
    for name, queries in _queries(dataset.clients, rng).items():
        for q in queries[:20]:
            index.search_json(q, 50)  # warm any lazily built structure
        samples: list[float] = []
        for _ in range(5):
            for q in queries:
                started = time.perf_counter()
                index.search_json(q, 50)  # what the route serves
                samples.append((time.perf_counter() - started) * 1000)
        print(
            f"    {name:14} n={len(samples):5}  p50 {statistics.median(samples):6.3f} ms"
            f"  p99 {_percentile(samples, 0.99):6.3f} ms  max {max(samples):6.3f} ms"
            "  (target p99 < 5 ms)"
        )


def _settings(url: str) -> Settings:
    return load_settings(
        UPSTREAM_NET_KEY=procs.API_KEY,
        UPSTREAM_NET_HOST=url,
        JWT_SECRET_KEY=procs.JWT_SECRET,
        API_USERNAME="bench",
        API_PASSWORD_HASH="$2b$12$" + "x" * 53,
        UPSTREAM_RATE_PER_MINUTE=100_000,
        UPSTREAM_RATE_PER_HOUR=1_000_000,
    )


@asynccontextmanager
async def service_parts(url: str) -> AsyncIterator[Parts]:
    """What the services are built from, as in production (services.py), on a memory store:
    the real upstream gateway to `url` with a budget the bench never spends, and an audit
    that keeps nothing."""
    settings = _settings(url)
    store = MemoryStore()
    async with build_http_client(settings) as http:
        gateway = UpstreamGateway(settings, http, RateBudget(store, 10**6, 10**7))
        lists = Lists(store, float(settings.STALE_IF_ERROR_SECONDS))
        audit = AuditLog(store, 1000, enabled=False)
        yield Parts(settings, store, gateway, lists, audit, Stopping())


async def _service_load(url: str, *, time_index: bool = True) -> tuple[ClientIndex, float, float]:
    """The service's own path: its cache loads every page, maps the rows and builds the
    index (in a worker thread, as in production). Returns the index, the whole load time
    and the time of the index build alone (built once more, the same way)."""
    async with service_parts(url) as parts:
        service = ClientService(parts)
        started = time.perf_counter()
        await service.cache.refresh()
        total = time.perf_counter() - started
        snapshot = await service.cache.get()
        index_time = 0.0
        if time_index:
            value = await service.store.get("cache:clients")
            assert value is not None
            started = time.perf_counter()
            await asyncio.to_thread(service._index, value["value"])
            index_time = time.perf_counter() - started
        return snapshot.value, total, index_time


async def _raw_fetch(url: str, page_size: int, parallel: int) -> float:
    """The upstream's own time: the same pages, same parallelism, no parsing beyond JSON."""
    headers = {"Authorization": f"Api-Key {procs.API_KEY}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:
        started = time.perf_counter()
        first = (await http.get("/api/clientes/", params={"limit": page_size})).json()
        sem = asyncio.Semaphore(parallel)

        async def page(offset: int) -> None:
            async with sem:
                (
                    await http.get("/api/clientes/", params={"limit": page_size, "offset": offset})
                ).json()

        await asyncio.gather(*(page(o) for o in range(page_size, first["count"], page_size)))
        return time.perf_counter() - started


def run_load(*, clients: int) -> None:
    from tests.support import run_server

    print(
        f"(c) load and index {clients:,} clients from the simulator (page size 500, "
        "4 pages in parallel)"
    )
    app = create_simulator_app(SimulatorConfig(api_key=procs.API_KEY, clients=clients, seed=7))
    with run_server(app) as url:
        asyncio.run(_raw_fetch(url, 500, 4))  # let the simulator encode its rows once
        upstream_time = min(asyncio.run(_raw_fetch(url, 500, 4)) for _ in range(2))
        index, total, index_time = asyncio.run(_service_load(url))
        assert len(index) == clients
        del index
        gc.collect()
        tracemalloc.start()
        kept = asyncio.run(_service_load(url, time_index=False))  # held for the peak
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del kept
    print(f"    upstream's own time (raw pages)      {upstream_time:6.2f} s")
    print(
        f"    service load: fetch + map + index    {total:6.2f} s "
        f"(of which the index build {index_time:.2f} s)"
    )
    print(f"    beyond the upstream's own time       {total - upstream_time:6.2f} s (target < 3 s)")
    print(f"    peak traced memory (fetch+map+index) {peak / 2**20:6.1f} MiB")
