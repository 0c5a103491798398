"""(d) the cost of metrics: the by-document lookup workload of (a) against two gateways, one
with METRICS_ENABLED=true and one with false, in alternating rounds on the same machine."""

from __future__ import annotations

import shutil

import httpx

from bench import lookups, procs


def run(*, clients: int, duration: int, connections: int, rounds: int = 3) -> None:
    if shutil.which("wrk") is None:
        print("(d) skipped: wrk is not installed (Debian/Ubuntu: apt-get install wrk)")
        return
    print(
        f"(d) metrics cost on by-document lookups: {connections} connections, {duration} s a "
        f"run, {rounds} rounds alternating metrics on and off (medians), {clients:,} clients"
    )
    with (
        procs.simulator(clients) as upstream,
        procs.gateway(upstream, METRICS_ENABLED="true") as on,
        procs.gateway(upstream, METRICS_ENABLED="false") as off,
    ):
        documents = lookups._documents(upstream, 2000)
        token = httpx.post(
            f"{on}/api/v1/auth/token",
            data={"username": procs.USERNAME, "password": procs.PASSWORD},
        ).json()["access_token"]
        auth = {"Authorization": f"Bearer {token}"}
        for gw in (on, off):
            # The list waits for the full load; one routed lookup verifies the token there.
            httpx.get(f"{gw}/api/v1/clients/", headers=auth, timeout=120).raise_for_status()
            httpx.get(f"{gw}/api/v1/clients/by-document/{documents[0]}", headers=auth)
        script = lookups._lua(documents, token)
        lookups.wrk(on, script, 2, connections)  # warm-up
        lookups.wrk(off, script, 2, connections)
        on_runs: list[lookups.WrkResult] = []
        off_runs: list[lookups.WrkResult] = []
        for n in range(rounds):
            # Alternate which goes first, so a drift in the machine's load hits both alike.
            order = (
                ((on, on_runs), (off, off_runs)) if n % 2 == 0 else ((off, off_runs), (on, on_runs))
            )
            for url, results in order:
                results.append(lookups.wrk(url, script, duration, connections))
        counted = httpx.get(f"{on}/metrics").text
    on_result, off_result = lookups._median(on_runs), lookups._median(off_runs)
    lookups.print_table([("metrics on", on_result), ("metrics off", off_result)])
    print(
        "    per round req/s, on: "
        + ", ".join(f"{r.rps:.0f}" for r in on_runs)
        + "; off: "
        + ", ".join(f"{r.rps:.0f}" for r in off_runs)
    )
    ratio = on_result.rps / off_result.rps if off_result.rps else 0.0
    print(f"    ratio on/off: {ratio:.2f}x (target >= 0.90x)")
    lookup_series = [
        line
        for line in counted.splitlines()
        if line.startswith("isp_gateway_requests_total{") and "by-document" in line
    ]
    print(f"    counted by the on gateway: {'; '.join(lookup_series) or 'nothing (!)'}")
