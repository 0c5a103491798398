"""(i) outage notices: the delay from a router's flag flipping to the receiver having the
signed notice, and what one sweep of the router catalogue costs with notices on and off.

Delay: the simulator (20,000 clients) and `isp-gateway serve` as real processes on loopback,
the shipped settings (OUTAGE_CACHE_SECONDS=60, the shipped upstream budget) but a
WEBHOOKS_FILE with one receiver on loopback (WEBHOOKS_ALLOW_HTTP); the receiver is a thread of
this process that notes when each notice arrives. A router's flag is raised, then cleared, in
turn, each right after the previous notice arrived (so just after a sweep: the worst case);
each delay is from the control call that flips it to the notice's arrival. A flip waits
for the next sweep (every 0.8 of OUTAGE_CACHE_SECONDS: up to 48 s), then up to a second to be
compared; the part from the notice being queued (the gateway's log line of the flip) to its
arrival is shown apart.

Sweep cost: in-process on a memory store, 50,000 clients on 15 routers in the simulator; one
sweep is the catalogue's refresh plus the comparison under the store lock. With notices off
(no WEBHOOKS_FILE) and on (three subscriptions: each flip queues three notices), alternating,
with no flip and with one (a raised flag: its services found in the client list).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from bench import procs
from bench.indexing import service_parts
from isp_gateway.clients.service import ClientService
from isp_gateway.notices import subscriptions
from isp_gateway.notices.sender import build_webhook_client
from isp_gateway.notices.service import Notices
from isp_gateway.outages.service import OutageService
from isp_gateway.simulator import SimulatorConfig, create_simulator_app

_FLIP_LINE = re.compile(
    r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+) WARNING isp_gateway.outages: general outage (\S+) "
    r"on router .*: (started|ended);"
)


@contextlib.contextmanager
def _receiver() -> Iterator[tuple[str, list[tuple[float, str]]]]:
    arrivals: list[tuple[float, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            arrivals.append((time.time(), self.headers["webhook-id"]))
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", arrivals
    finally:
        server.shutdown()
        server.server_close()


def _flips_logged(log: Path) -> dict[str, float]:
    """When the gateway queued each notice (its WARNING line per flip), by webhook id."""
    seen: dict[str, float] = {}
    for line in log.read_text(errors="replace").splitlines():
        found = _FLIP_LINE.match(line)
        if found:
            moment = datetime.strptime(found.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            seen[f"msg_{found.group(2)}_{found.group(3)}"] = moment
    return seen


def _delays(clients: int, flips: int) -> None:
    with (
        tempfile.TemporaryDirectory() as directory,
        _receiver() as (url, arrivals),
        procs.simulator(clients) as upstream,
        (Path(directory) / "gateway.log").open("wb") as log,
    ):
        hooks = Path(directory) / "webhooks.json"
        entry = subscriptions.new_entry("bench", url, list(subscriptions.EVENT_TYPES))
        subscriptions.add(hooks, entry)
        env = {"WEBHOOKS_FILE": str(hooks), "WEBHOOKS_ALLOW_HTTP": "true"}
        with procs.gateway(upstream, log=log, **env):
            time.sleep(5)  # the first sweeps and comparisons
            delays: list[float] = []
            for flip in range(flips):
                seen = len(arrivals)
                body = {"router_id": 1, "outage": flip % 2 == 0, "description": "Corte"}
                flipped = time.time()
                httpx.put(f"{upstream}/_sim/routers", json=body, timeout=10).raise_for_status()
                while len(arrivals) == seen:
                    if time.time() - flipped > 180:
                        raise RuntimeError("no notice arrived")
                    time.sleep(0.01)
                delays.append(arrivals[-1][0] - flipped)
        queued = _flips_logged(Path(directory) / "gateway.log")
    after = [at - queued[msg_id] for at, msg_id in arrivals if msg_id in queued]
    print(
        f"    flip to delivery (shipped settings, OUTAGE_CACHE_SECONDS=60; each flip just after "
        f"a sweep, the worst case), {flips} flips: "
        f"min {min(delays):.1f} s  median {statistics.median(delays):.1f} s  "
        f"max {max(delays):.1f} s"
    )
    print(
        f"      of which from the flip's notice queued to its delivery: "
        f"median {statistics.median(after) * 1000:.0f} ms  max {max(after) * 1000:.0f} ms "
        "(the rest: waiting for the next sweep, every 48 s, and the compare within 1 s)"
    )


async def _sweeps(url: str, rounds: int) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as directory:
        hooks = Path(directory) / "webhooks.json"
        for n in range(3):
            url_n = f"https://bot{n}.example.com/"
            subscriptions.add(hooks, subscriptions.new_entry(f"bot-{n}", url_n, ["outage.started"]))
        async with service_parts(url) as parts, build_webhook_client() as http:
            clients = ClientService(parts)
            await clients.cache.refresh()
            services: dict[str, OutageService] = {}
            for mode, path in (("off", None), ("on", hooks)):
                settings = parts.settings.model_copy(update={"WEBHOOKS_FILE": path})
                notices = Notices(
                    settings=settings, store=parts.store, http=http, audit=parts.audit
                )
                mode_parts = dataclasses.replace(parts, settings=settings)
                services[mode] = OutageService(mode_parts, clients=clients, notices=notices)
            async with httpx.AsyncClient(base_url=url) as control:
                for number in range(rounds):
                    for mode, outages in services.items():
                        await outages.detector.store.delete("outages:state")
                        await _sweep(outages)  # the state as of now: no outage
                        for kind in ("no flip", "flip"):
                            if kind == "flip":
                                body = {"router_id": 3, "outage": number % 2 == 0}
                                await control.put("/_sim/routers", json=body)
                            started = time.perf_counter()
                            await _sweep(outages)
                            elapsed = (time.perf_counter() - started) * 1000
                            timings.setdefault(f"{kind}, notices {mode}", []).append(elapsed)
                        await control.put("/_sim/routers", json={"reset": True})
            await clients.aclose()
    return timings


async def _sweep(outages: OutageService) -> None:
    await outages.catalogue.refresh()
    snapshot = await outages.catalogue.get()
    await outages.detector.compare(snapshot.value, snapshot.loaded_at)


def run(*, clients: int = 50_000, flips: int = 4, rounds: int = 15) -> None:
    from tests.support import run_server

    print(f"(i) outage notices: 20,000 clients for the delay, {clients:,} for the sweep's cost")
    _delays(20_000, flips)
    # One WARNING line a flip: dozens here.
    logging.getLogger("isp_gateway.outages").setLevel(logging.ERROR)
    app = create_simulator_app(SimulatorConfig(api_key=procs.API_KEY, clients=clients, seed=7))
    with run_server(app) as url:
        timings = asyncio.run(_sweeps(url, rounds))
    for name, samples in timings.items():
        print(
            f"    one sweep, {name:17} median {statistics.median(samples):7.2f} ms  "
            f"max {max(samples):7.2f} ms  (n={len(samples)})"
        )
    for kind in ("no flip", "flip"):
        extra = statistics.median(timings[f"{kind}, notices on"]) - statistics.median(
            timings[f"{kind}, notices off"]
        )
        print(f"    extra cost of notices on, {kind}: {extra:+.2f} ms a sweep")
