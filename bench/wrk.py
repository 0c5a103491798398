"""wrk, the load of the bench's HTTP parts: its scripts (the lookups, one request), one run
measured (req/s, latency percentiles, non-2xx, socket errors, and the server's CPU time per
request, read from /proc), the median of several runs, and the table they are printed in."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench import procs

_LATENCY = re.compile(r"^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s)\s*$", re.MULTILINE)
_MEAN = re.compile(r"^\s+Latency\s+([\d.]+)(us|ms|s)", re.MULTILINE)
_RPS = re.compile(r"^Requests/sec:\s+([\d.]+)", re.MULTILINE)
_NON2XX = re.compile(r"Non-2xx or 3xx responses:\s+(\d+)")
_SOCKET_ERRORS = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")
_REQUESTS = re.compile(r"^\s+(\d+) requests in", re.MULTILINE)
_UNIT = {"us": 0.001, "ms": 1.0, "s": 1000.0}


@dataclass
class WrkResult:
    rps: float
    p50_ms: float
    p99_ms: float
    non_2xx: int
    errors: int = 0
    mean_ms: float = 0.0
    requests: int = 0
    cpu_us: float = 0.0  # the server's CPU time per request: steady on a busy machine


def lookup_script(documents: list[str], token: str, header: str = "Authorization") -> str:
    docs = ",".join(json.dumps(d) for d in documents)
    value = f"Bearer {token}" if header == "Authorization" else token
    return f"""
local docs = {{{docs}}}
local i = 0
wrk.headers["{header}"] = "{value}"
request = function()
  i = i + 1
  return wrk.format("GET", "/api/v1/clients/by-document/" .. docs[(i % #docs) + 1])
end
"""


def request_script(method: str, path: str, headers: dict[str, str], body: str | None = None) -> str:
    lines = [f"wrk.method = {json.dumps(method)}", f"wrk.path = {json.dumps(path)}"]
    lines += [f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in headers.items()]
    if body is not None:
        lines.append(f"wrk.body = {json.dumps(body)}")
    return "\n".join(lines) + "\n"


def no_wrk(part: str) -> bool:
    """True, said as the part's skip line, when wrk is not installed."""
    if shutil.which("wrk") is not None:
        return False
    print(f"{part} skipped: wrk is not installed (Debian/Ubuntu: apt-get install wrk)")
    return True


def wrk(
    target: procs.Served, script: str, duration: int, connections: int, threads: int = 2
) -> WrkResult:
    cpu_before = target.cpu_seconds()
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as handle:
        handle.write(script)
    out = subprocess.run(
        [
            *("wrk", f"-t{min(threads, connections)}", f"-c{connections}", f"-d{duration}s"),
            *("--latency", "-s", handle.name, target.url),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    cpu = target.cpu_seconds() - cpu_before
    Path(handle.name).unlink()
    lat = {p: float(v) * _UNIT[u] for p, v, u in _LATENCY.findall(out)}
    rps = _RPS.search(out)
    non2xx = _NON2XX.search(out)
    errors = _SOCKET_ERRORS.search(out)
    mean = _MEAN.search(out)
    count = _REQUESTS.search(out)
    requests = int(count.group(1)) if count else 0
    return WrkResult(
        float(rps.group(1)) if rps else 0.0,
        lat.get("50", 0.0),
        lat.get("99", 0.0),
        int(non2xx.group(1)) if non2xx else 0,
        sum(int(n) for n in errors.groups()) if errors else 0,
        float(mean.group(1)) * _UNIT[mean.group(2)] if mean else 0.0,
        requests,
        cpu / requests * 1e6 if requests else 0.0,
    )


def median(results: list[WrkResult]) -> WrkResult:
    def mid(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    return WrkResult(
        mid([r.rps for r in results]),
        mid([r.p50_ms for r in results]),
        mid([r.p99_ms for r in results]),
        sum(r.non_2xx for r in results),
        sum(r.errors for r in results),
        mid([r.mean_ms for r in results]),
        sum(r.requests for r in results),
        mid([r.cpu_us for r in results]),
    )


def row(name: str, r: WrkResult) -> str:
    return (
        f"    {name:34}{r.rps:>9.0f}{r.p50_ms:>9.2f}{r.p99_ms:>9.2f}"
        f"{r.non_2xx:>9}{r.errors:>8}{r.cpu_us:>12.0f}"
    )


def header() -> str:
    return (
        f"    {'':34}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'non-2xx':>9}{'errors':>8}"
        f"{'CPU us/req':>12}"
    )


def check(label: str, ok: bool) -> str:
    return f"{label}: {'OK' if ok else 'MISSED'}"
