"""(g) scale: a 200,000-subscriber ISP behind the upstream's own 100 calls a minute.

The simulator holds 200,000 clients (their pending invoices and tickets), enforces its own
rate limit (`--rate-limit`, a sliding minute) and answers in 0.3-0.6 s. Two gateway workers
(separate processes) share a Redis db of the bench's own. Printed:
- the first load of each whole list (from the store's stamps) beside the fastest the
  background share of the budget allows;
- the refresh plan (as the workers log it, and for every list the bench saw loaded);
- RSS per worker after warm-up, and per client;
- bot conversations at a steady rate (by-phone, verify, account, ticket; diagnose when the
  build has it) during the first loads (background paging) and after them (no background
  work), with p50/p99 per step and every 503 `upstream_rate_limited`.
Real time, not scaled: the minute is 60 s and the hour 3600 s, so the run shows the minute's
limits; the hour's plan is printed, not run. Timing figures on a shared machine are noisy;
memory figures are reliable.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import redis

from bench import procs
from isp_gateway.store.memory import MemoryStore
from isp_gateway.store.redis import PREFIX
from isp_gateway.upstream.budget import RateBudget
from isp_gateway.upstream.planner import RefreshPlanner

# A db no test suite uses (tests use 0, 2 and 9-15); only the gateway's keys are deleted.
REDIS_URL = "redis://127.0.0.1:6379/7"
# Whole lists the bench watches (those the build has), with their configured lifetimes.
LISTS = {
    "clients": 300,
    "invoices:pending": 300,
    "tickets:active": 300,
    "plans:list": 900,
}
_PLAN_LINE = re.compile(r"refresh plan \((?P<reason>[^;]*);.*?\): (?P<plan>.*)$")


def _clean(client: redis.Redis) -> None:
    keys = list(client.scan_iter(match=f"{PREFIX}*", count=5000))
    for i in range(0, len(keys), 1000):
        client.delete(*keys[i : i + 1000])


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return math.nan


def _worker_rss_mb(pid: int) -> float:
    """RSS of the process serving requests: `serve` runs granian, whose workers are child
    processes of a small supervisor; the largest process of the tree is the worker."""
    pids = [pid]
    found = []
    while pids:
        current = pids.pop()
        with contextlib.suppress(OSError):
            found.append(_rss_mb(current))
            for task in Path(f"/proc/{current}/task").iterdir():
                pids += [int(c) for c in (task / "children").read_text().split()]
    return max(found, default=math.nan)


def _simulator(
    clients: int, tickets: int, rate: int, page_cap: int
) -> contextlib.AbstractContextManager[str]:
    flags = ["--tickets", str(tickets), "--rate-limit", f"{rate}/min", "--latency", "0.3,0.6"]
    return procs.simulator(clients, *flags, "--max-page-size", str(page_cap), timeout=600)


@contextlib.contextmanager
def _worker(upstream: str, env: dict[str, str], log_path: Path) -> Iterator[tuple[str, int]]:
    port = procs.free_port()
    args = [sys.executable, "-m", "isp_gateway", "serve", "--port", str(port)]
    with (
        log_path.open("wb") as log_file,
        procs.process(args, {**procs.gateway_env(upstream), **env}, log_file) as proc,
    ):
        url = f"http://127.0.0.1:{port}"
        procs.wait_until(f"{url}/health", timeout=120)
        yield url, proc.pid


def _stamps(client: redis.Redis) -> dict[str, float]:
    out = {}
    for name in LISTS:
        raw = client.get(f"{PREFIX}cache:{name}:at")
        if raw is not None:
            out[name] = float(json.loads(raw)["at"])
    return out


class Conversations:
    """Bot conversations at a steady rate, each step timed; run in threads."""

    def __init__(self, workers: list[str], token: str, people: list[dict[str, Any]]) -> None:
        self.workers = workers
        self.auth = {"Authorization": f"Bearer {token}"}
        self.people = people
        self.samples: dict[str, list[float]] = defaultdict(list)
        self.statuses: Counter[str] = Counter()
        self.rate_limited: Counter[str] = Counter()
        self.failures: dict[str, str] = {}  # the first failure body per step and status
        self.lock = threading.Lock()
        self.rng = random.Random(11)

    def _step(self, http: httpx.Client, name: str, method: str, path: str, **kw: Any) -> Any:
        started = time.perf_counter()
        try:
            response = http.request(method, path, headers=self.auth, **kw)
        except httpx.HTTPError as exc:
            with self.lock:
                self.samples[name].append(time.perf_counter() - started)
                self.statuses[f"{name} {type(exc).__name__}"] += 1
            return None
        elapsed = time.perf_counter() - started
        body: Any = None
        with contextlib.suppress(ValueError):
            body = response.json()
        with self.lock:
            self.samples[name].append(elapsed)
            self.statuses[f"{name} {response.status_code}"] += 1
            limited = isinstance(body, dict) and body.get("action") == "upstream_rate_limited"
            if response.status_code == 503 and limited:
                self.rate_limited[name] += 1
            if response.status_code >= 500:
                key = f"{name} {response.status_code}"
                self.failures.setdefault(key, response.text[:160])
        return body

    def one(self, n: int) -> None:
        person = self.people[n % len(self.people)]
        base = self.workers[n % len(self.workers)]
        phone = re.findall(r"\d{7,}", str(person["telefono"]))[0]
        sid = person["id_servicio"]
        with httpx.Client(base_url=base, timeout=60) as http:
            self._step(http, "by-phone", "GET", f"/api/v1/clients/by-phone/{phone}")
            verify = {
                "name": person["nombre"],
                "address": person["direccion"],
                "internet_plan_name": (person.get("plan_internet") or {}).get("nombre") or "x",
            }
            self._step(http, "verify", "POST", f"/api/v1/clients/{sid}/verify", json=verify)
            self._step(http, "account", "GET", f"/api/v1/clients/{sid}/account")
            technician = (person.get("tecnico") or {}).get("id")
            zone = (person.get("zona") or {}).get("id")
            if n % 5 == 0 and technician and zone:
                ticket = {
                    "service_id": sid,
                    "subject": "Internet Lento",
                    "description": "bench: slow connection",
                    "technician_id": technician,
                    "zone_id": zone,
                }
                self._step(http, "ticket", "POST", "/api/v1/tickets", json=ticket)

    def run(
        self, seconds: float, every: float, start: int, stop: threading.Event | None = None
    ) -> None:
        """One conversation every `every` seconds for `seconds` (or until `stop` is set),
        each in its own thread, numbered from `start`."""
        threads: list[threading.Thread] = []
        deadline = time.monotonic() + seconds
        n = start
        next_at = time.monotonic()
        while next_at < deadline and not (stop is not None and stop.is_set()):
            time.sleep(max(0.0, next_at - time.monotonic()))
            thread = threading.Thread(target=self.one, args=(n,), daemon=True)
            thread.start()
            threads.append(thread)
            n += 1
            next_at += every
        for thread in threads:
            thread.join(timeout=120)

    def report(self, label: str) -> None:
        print(f"  {label}:")
        for name, values in sorted(self.samples.items()):
            ordered = sorted(values)
            p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
            print(
                f"    {name:9s} n={len(values):4d}  p50 {statistics.median(values) * 1000:7.0f} ms"
                f"  p99 {p99 * 1000:7.0f} ms"
            )
        codes = ", ".join(f"{k}: {v}" for k, v in sorted(self.statuses.items()))
        print(f"    statuses: {codes}")
        limited = sum(self.rate_limited.values())
        print(f"    503 upstream_rate_limited: {limited} {dict(self.rate_limited) or ''}")
        for key, text in sorted(self.failures.items()):
            print(f"    first {key}: {text}")


def _people(upstream: str, clients: int, count: int, rate: int) -> list[dict[str, Any]]:
    """Customers for the bots, read from the simulator before the gateways start; then its
    rate window is reset, so these reads do not count against the gateways' minute."""
    headers = {"Authorization": f"Api-Key {procs.API_KEY}"}
    rng = random.Random(5)
    offsets = rng.sample(range(0, max(1, clients - 50), 50), 4)
    people: list[dict[str, Any]] = []
    for offset in offsets:
        page = httpx.get(
            f"{upstream}/api/clientes/",
            params={"limit": 50, "offset": offset},
            headers=headers,
            timeout=60,
        ).json()
        people += [
            r
            for r in page["results"]
            if re.search(r"\d{7,}", str(r.get("telefono") or "")) and r.get("cedula")
        ]
    httpx.put(f"{upstream}/_sim/faults", json={"rate_limit_per_minute": rate}, timeout=30)
    return people[:count]


def run(
    *,
    clients: int = 200_000,
    tickets: int = 5_000,
    rate: int = 100,
    page_size: int = 1000,
    conversation_every: float = 10.0,
    quiet_seconds: float = 60.0,
    max_load_seconds: float = 660.0,
) -> None:
    print(
        f"(g) scale: {clients:,} clients, {tickets:,} tickets and their pending invoices "
        f"upstream; simulator limit {rate}/min (sliding), latency 0.3-0.6 s; two workers on "
        f"Redis; UPSTREAM_RATE_PER_MINUTE={rate}, UPSTREAM_RATE_PER_HOUR={rate * 10}, "
        f"UPSTREAM_INTERACTIVE_RESERVE=0.3, UPSTREAM_PAGE_SIZE={page_size} (the simulator's cap)"
    )
    print("  time is not scaled (a 60 s minute); timing figures on a shared machine are noisy")
    store = redis.Redis.from_url(REDIS_URL)
    _clean(store)
    env = {
        "REDIS_URL": REDIS_URL,
        # Each list's refresh plan is logged at DEBUG (`_plans` reads it from the logs).
        "LOG_LEVEL": "DEBUG",
        "UPSTREAM_RATE_PER_MINUTE": str(rate),
        "UPSTREAM_RATE_PER_HOUR": str(rate * 10),
        "UPSTREAM_PAGE_SIZE": str(page_size),
        "CLIENT_CACHE_SECONDS": str(LISTS["clients"]),
    }
    generated = time.monotonic()
    logs = Path(tempfile.mkdtemp(prefix="isp-gateway-scale-"))
    try:
        with _simulator(clients, tickets, rate, page_size) as upstream:
            print(f"  simulator up in {time.monotonic() - generated:.0f} s (data generation)")
            people = _people(upstream, clients, 150, rate)
            with contextlib.ExitStack() as stack:
                started = time.time()
                workers = [
                    stack.enter_context(_worker(upstream, env, logs / f"worker{i}.log"))
                    for i in range(2)
                ]
                urls = [url for url, _ in workers]
                token = httpx.post(
                    f"{urls[0]}/api/v1/auth/token",
                    data={"username": procs.USERNAME, "password": procs.PASSWORD},
                ).json()["access_token"]
                # Phase 1: conversations while the first loads page in the background.
                stop = threading.Event()
                first_loads: dict[str, float] = {}

                def watch() -> None:
                    while not stop.is_set():
                        for name, at in _stamps(store).items():
                            first_loads.setdefault(name, at - started)
                        if {"clients", "invoices:pending"} <= first_loads.keys():
                            stop.set()
                        time.sleep(1)

                watcher = threading.Thread(target=watch, daemon=True)
                watcher.start()
                bots_during = Conversations(urls, token, people)
                phase = threading.Thread(
                    target=bots_during.run,
                    args=(max_load_seconds, conversation_every, 0, stop),
                    daemon=True,
                )
                phase.start()
                phase.join()
                stop.set()
                pages = _pages(store)
                # The other worker adopts the lists and builds its index (about 10 s at
                # 200,000 clients on a busy machine) before RSS is read.
                time.sleep(30)
                rss = [_worker_rss_mb(pid) for _, pid in workers]
                bots_after = Conversations(urls, token, people)
                bots_after.run(quiet_seconds, conversation_every, 10_000)
                stats = httpx.get(f"{upstream}/_sim/stats", timeout=30).json()
            plans = _plans(logs)
    finally:
        _clean(store)
        store.close()
    _print_loads(first_loads, pages, plans, rate)
    print(
        "  RSS per worker after warm-up (granian's worker process, not its supervisor): "
        f"{', '.join(f'{r:.0f} MB' for r in rss)}"
    )
    print(
        f"    {max(rss) * 1024 * 1024 / clients:,.0f} B per client (whole process, "
        "value + index + everything else)"
    )
    bots_during.report("conversations during the first loads (background paging)")
    bots_after.report("conversations after the loads (no background work)")
    print(f"  upstream calls answered by the simulator: {stats.get('total')}")


def _plans(logs: Path) -> list[str]:
    lines = []
    for path in sorted(logs.glob("worker*.log")):
        last = None
        for line in path.read_text(errors="replace").splitlines():
            match = _PLAN_LINE.search(line)
            if match:
                last = f"{path.stem}: {match['plan']}"
        if last:
            lines.append(last)
    return lines


def _pages(client: redis.Redis) -> dict[str, int]:
    """Pages of each stored list's load: the entry ends with its page count, so only the
    tail of a value of tens of megabytes is read."""
    out = {}
    for name in LISTS:
        raw = client.getrange(f"{PREFIX}cache:{name}", -40, -1)
        tail = raw if isinstance(raw, bytes) else str(raw or "").encode()
        match = re.search(rb'"pages":(\d+)', tail)
        if match:
            out[name] = int(match[1])
    return out


def _print_loads(
    first: dict[str, float], pages: dict[str, int], logged: list[str], rate: int
) -> None:
    # The plan for every list loaded, registered or not with the build's planner.
    planner = RefreshPlanner(RateBudget(MemoryStore(), rate, rate * 10, reserve=0.3))
    for name, lifetime in LISTS.items():
        if name in pages:
            planner.register(name, lifetime)
            planner.measured(name, pages[name])
    plan = planner.plan()
    print("  first load of each list (after the workers started) / fastest the budget allows:")
    for name, seconds in sorted(first.items()):
        if name not in plan:
            continue
        p = plan[name]
        print(f"    {name:17s} {seconds:6.0f} s / {p.fastest_load:4.0f} s  ({p.pages} pages)")
    missing = [n for n in LISTS if n not in first]
    if missing:
        print(f"    not in this build (or not loaded in time): {', '.join(missing)}")
    print("  planned refresh (lifetime; calls/h) for the lists loaded, within 70 % of the hour:")
    for p in plan.values():
        print(
            f"    {p.resource:17s} every {p.refresh_every:6.0f} s (lifetime {p.lifetime:6.0f} s, "
            f"configured {p.configured:.0f} s; {p.calls_per_hour:4.0f} calls/h)"
        )
    for line in logged:
        print(f"    as logged by {line}")
