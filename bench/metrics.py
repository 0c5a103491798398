"""(f) the cost of metrics: the by-document lookup workload of (a) against two gateways started
as `isp-gateway serve` ships, one with METRICS_ENABLED=true (the default) and one with false,
in alternating rounds on the same machine.

Besides req/s it reports the server's CPU time per request (from /proc), which other loads on
a shared machine disturb far less than throughput does."""

from __future__ import annotations

import httpx

from bench import lookups, procs, wrk


def run(*, clients: int, duration: int, connections: int, rounds: int = 3) -> None:
    if wrk.no_wrk("(f)"):
        return
    print(
        f"(f) metrics cost on by-document lookups: {connections} connections, {duration} s a "
        f"run, {rounds} rounds alternating metrics on and off (medians), {clients:,} clients"
    )
    with (
        procs.simulator(clients) as upstream,
        lookups._log_file() as (_, log_on),
        lookups._log_file() as (_, log_off),
        procs.gateway(upstream, log=log_on, METRICS_ENABLED="true") as on,
        procs.gateway(upstream, log=log_off, METRICS_ENABLED="false") as off,
    ):
        documents = lookups._documents(upstream, 2000)
        token = lookups._token(on)
        for gw in (on, off):
            lookups._warm(gw, token, documents[0])
        script = wrk.lookup_script(documents, token)
        for gw in (on, off):
            wrk.wrk(gw, script, 2, connections)  # warm-up
        runs: dict[str, list[wrk.WrkResult]] = {"on": [], "off": []}
        for n in range(rounds):
            # Alternate which goes first, so a drift in the machine's load hits both alike.
            order = [("on", on), ("off", off)] if n % 2 == 0 else [("off", off), ("on", on)]
            for name, gw in order:
                runs[name].append(wrk.wrk(gw, script, duration, connections))
        counted = httpx.get(f"{on.url}/metrics").text
    on_r, off_r = wrk.median(runs["on"]), wrk.median(runs["off"])
    print(wrk.header())
    print(wrk.row("metrics on (shipped default)", on_r))
    print(wrk.row("metrics off", off_r))
    for name in ("on", "off"):
        print(
            f"    per round, metrics {name}: "
            + ", ".join(f"{r.rps:.0f} req/s {r.cpu_us:.0f} us CPU/req" for r in runs[name])
        )
    ratio = on_r.rps / off_r.rps if off_r.rps else 0.0
    cpu_ratio = on_r.cpu_us / off_r.cpu_us if off_r.cpu_us else 0.0
    print(f"    ratio on/off, req/s: {ratio:.2f}x ({wrk.check('target >= 0.90x', ratio >= 0.9)})")
    print(
        f"    server CPU per request on/off: {cpu_ratio:.2f}x "
        f"({wrk.check('target <= 1.10x', cpu_ratio <= 1.1)})"
    )
    series = [
        line
        for line in counted.splitlines()
        if line.startswith("isp_gateway_requests_total{") and "by-document" in line
    ]
    print(f"    counted by the on gateway: {'; '.join(series) or 'nothing (!)'}")
