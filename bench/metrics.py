"""(d) the cost of metrics: the by-document lookup workload of (a) against two gateways, one
with METRICS_ENABLED=true and one with false, in alternating rounds on the same machine.

Besides req/s it reports the server's CPU time per request (from /proc), which other loads on
a shared machine disturb far less than throughput does."""

from __future__ import annotations

import shutil
import subprocess

import httpx

from bench import lookups, procs


def _round(
    url: str, proc: subprocess.Popen[bytes], script: str, duration: int, connections: int
) -> tuple[lookups.WrkResult, float]:
    """One wrk run; the result and the server's CPU microseconds per request."""
    before = procs.cpu_seconds(proc.pid)
    result = lookups.wrk(url, script, duration, connections)
    used = procs.cpu_seconds(proc.pid) - before
    requests = result.rps * duration
    return result, (used / requests * 1e6) if requests else 0.0


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


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
        procs.gateway_process(upstream, METRICS_ENABLED="true") as on,
        procs.gateway_process(upstream, METRICS_ENABLED="false") as off,
    ):
        documents = lookups._documents(upstream, 2000)
        token = httpx.post(
            f"{on[0]}/api/v1/auth/token",
            data={"username": procs.USERNAME, "password": procs.PASSWORD},
        ).json()["access_token"]
        auth = {"Authorization": f"Bearer {token}"}
        for url, _ in (on, off):
            # The list waits for the full load; one routed lookup verifies the token there.
            httpx.get(f"{url}/api/v1/clients/", headers=auth, timeout=120).raise_for_status()
            httpx.get(f"{url}/api/v1/clients/by-document/{documents[0]}", headers=auth)
        script = lookups._lua(documents, token)
        for url, _ in (on, off):
            lookups.wrk(url, script, 2, connections)  # warm-up
        runs: dict[str, list[tuple[lookups.WrkResult, float]]] = {"on": [], "off": []}
        for n in range(rounds):
            # Alternate which goes first, so a drift in the machine's load hits both alike.
            order = [("on", on), ("off", off)] if n % 2 == 0 else [("off", off), ("on", on)]
            for name, (url, proc) in order:
                runs[name].append(_round(url, proc, script, duration, connections))
        counted = httpx.get(f"{on[0]}/metrics").text
    on_result = lookups._median([r for r, _ in runs["on"]])
    off_result = lookups._median([r for r, _ in runs["off"]])
    on_cpu = _median([c for _, c in runs["on"]])
    off_cpu = _median([c for _, c in runs["off"]])
    lookups.print_table([("metrics on", on_result), ("metrics off", off_result)])
    for name in ("on", "off"):
        print(
            f"    per round, metrics {name}: "
            + ", ".join(f"{r.rps:.0f} req/s {c:.0f} us CPU/req" for r, c in runs[name])
        )
    ratio = on_result.rps / off_result.rps if off_result.rps else 0.0
    cpu_ratio = on_cpu / off_cpu if off_cpu else 0.0
    print(f"    ratio on/off, req/s: {ratio:.2f}x (target >= 0.90x)")
    print(
        f"    server CPU per request: on {on_cpu:.0f} us, off {off_cpu:.0f} us, "
        f"on/off {cpu_ratio:.2f}x (target <= 1.10x)"
    )
    series = [
        line
        for line in counted.splitlines()
        if line.startswith("isp_gateway_requests_total{") and "by-document" in line
    ]
    print(f"    counted by the on gateway: {'; '.join(series) or 'nothing (!)'}")
