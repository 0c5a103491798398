"""(a) by-document lookups under load: the gateway beside a bare app, measured by wrk."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench import procs

_LATENCY = re.compile(r"^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s)\s*$", re.MULTILINE)
_RPS = re.compile(r"^Requests/sec:\s+([\d.]+)", re.MULTILINE)
_NON2XX = re.compile(r"Non-2xx or 3xx responses:\s+(\d+)")
_UNIT = {"us": 0.001, "ms": 1.0, "s": 1000.0}


@dataclass
class WrkResult:
    rps: float
    p50_ms: float
    p99_ms: float
    non_2xx: int


def _lua(documents: list[str], token: str) -> str:
    docs = ",".join(json.dumps(d) for d in documents)
    return f"""
local docs = {{{docs}}}
local i = 0
wrk.headers["Authorization"] = "Bearer {token}"
request = function()
  i = i + 1
  return wrk.format("GET", "/api/v1/clients/by-document/" .. docs[(i % #docs) + 1])
end
"""


def wrk(url: str, script: str, duration: int, connections: int) -> WrkResult:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(script)
    out = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{duration}s", "--latency", "-s", handle.name, url],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    Path(handle.name).unlink()
    lat = {p: float(v) * _UNIT[u] for p, v, u in _LATENCY.findall(out)}
    rps = _RPS.search(out)
    non2xx = _NON2XX.search(out)
    return WrkResult(
        float(rps.group(1)) if rps else 0.0,
        lat.get("50", 0.0),
        lat.get("99", 0.0),
        int(non2xx.group(1)) if non2xx else 0,
    )


def _documents(upstream: str, count: int) -> list[str]:
    headers = {"Authorization": f"Api-Key {procs.API_KEY}"}
    docs: list[str] = []
    offset = 0
    with httpx.Client(base_url=upstream, headers=headers, timeout=30) as client:
        while True:
            page = client.get("/api/clientes/", params={"limit": 1000, "offset": offset}).json()
            docs.extend(str(r["cedula"]) for r in page["results"] if r.get("cedula"))
            offset += len(page["results"])
            if not page.get("next") or not page["results"]:
                break
    random.Random(1).shuffle(docs)
    return docs[:count]


def _median(results: list[WrkResult]) -> WrkResult:
    def mid(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    return WrkResult(
        mid([r.rps for r in results]),
        mid([r.p50_ms for r in results]),
        mid([r.p99_ms for r in results]),
        sum(r.non_2xx for r in results),
    )


def print_table(rows: list[tuple[str, WrkResult]]) -> None:
    print(f"    {'':22}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'non-2xx':>10}")
    for name, r in rows:
        print(f"    {name:22}{r.rps:>10.0f}{r.p50_ms:>10.2f}{r.p99_ms:>10.2f}{r.non_2xx:>10}")


def run(*, clients: int, duration: int, connections: int, rounds: int = 3) -> None:
    if shutil.which("wrk") is None:
        print("(a) skipped: wrk is not installed (Debian/Ubuntu: apt-get install wrk)")
        return
    print(
        f"(a) by-document lookups: {connections} connections, {duration} s a run, "
        f"{rounds} rounds alternating gateway and bare app (medians), "
        f"{clients:,} clients upstream"
    )
    with procs.simulator(clients) as upstream, procs.gateway(upstream) as gw:
        documents = _documents(upstream, 2000)
        token = httpx.post(
            f"{gw}/api/v1/auth/token",
            data={"username": procs.USERNAME, "password": procs.PASSWORD},
        ).json()["access_token"]
        auth = {"Authorization": f"Bearer {token}"}
        # The list endpoint waits for the full load: after it the index is warm.
        httpx.get(f"{gw}/api/v1/clients/", headers=auth, timeout=120).raise_for_status()
        sample = httpx.get(f"{gw}/api/v1/clients/by-document/{documents[0]}", headers=auth)
        sample.raise_for_status()
        script = _lua(documents, token)
        with tempfile.NamedTemporaryFile("wb", suffix=".json", delete=False) as body:
            body.write(sample.content)
        with procs.bare(body.name) as base:
            wrk(gw, script, 2, connections)  # warm-up
            wrk(base, script, 2, connections)
            httpx.post(f"{upstream}/_sim/reset-stats").raise_for_status()
            gateway_runs: list[WrkResult] = []
            bare_runs: list[WrkResult] = []
            for _ in range(rounds):
                gateway_runs.append(wrk(gw, script, duration, connections))
                bare_runs.append(wrk(base, script, duration, connections))
            stats = httpx.get(f"{upstream}/_sim/stats").json()
            upstream_calls = int(stats.get("total", 0))
        Path(body.name).unlink()
    gateway_result, bare_result = _median(gateway_runs), _median(bare_runs)

    print(f"    body size {len(sample.content)} bytes (same body for the bare app)")
    print_table([("gateway", gateway_result), ("bare Starlette", bare_result)])
    print(
        "    per round req/s, gateway: "
        + ", ".join(f"{r.rps:.0f}" for r in gateway_runs)
        + "; bare: "
        + ", ".join(f"{r.rps:.0f}" for r in bare_runs)
    )
    ratio = gateway_result.rps / bare_result.rps if bare_result.rps else 0.0
    print(f"    ratio gateway/bare: {ratio:.2f}x (target >= 0.60x)")
    print(f"    upstream calls during the measured runs: {upstream_calls} (target 0)")
