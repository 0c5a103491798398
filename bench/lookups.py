"""(a) by-document lookups under load, measured by wrk: the gateway as `isp-gateway serve`
ships (no setting changed but the upstream and the secrets: access log on, INFO, the
default server) beside a bare Starlette app under uvicorn and under the same server, and
the same lookups on the same gateway with an API key instead of the JWT (its server CPU a
request at most 1.03x the JWT's); then the server CPU a request of four refusals (an unknown
route, a bad token, a key without the scope, a malformed body) beside a cached lookup, each
at most 1.00x, and the gateway's own time a request of each in-process (bench/edge_cost.py);
then `serve --workers 2` on a throwaway Redis.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

from bench import edge_cost, procs
from isp_gateway.auth import keys

_LATENCY = re.compile(r"^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s)\s*$", re.MULTILINE)
_MEAN = re.compile(r"^\s+Latency\s+([\d.]+)(us|ms|s)", re.MULTILINE)
_RPS = re.compile(r"^Requests/sec:\s+([\d.]+)", re.MULTILINE)
_NON2XX = re.compile(r"Non-2xx or 3xx responses:\s+(\d+)")
_SOCKET_ERRORS = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")
_REQUESTS = re.compile(r"^\s+(\d+) requests in", re.MULTILINE)
_UNIT = {"us": 0.001, "ms": 1.0, "s": 1000.0}

SERVER = "granian"  # the shipped default of SERVER (settings.py)
# The same lookups on the same gateway with an API key (X-API-Key) instead of the JWT.
KEY_ROW = "gateway, API key (X-API-Key)"
# The refusals measured beside a cached lookup (CALLERS.md 6 "The cost of refusing": each
# costs at most the server CPU of a successful cached lookup).
REFUSAL_ROUNDS = 5
REFUSAL_SECONDS = 2


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


def _lua(documents: list[str], token: str, header: str = "Authorization") -> str:
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


def _lua_one(method: str, path: str, headers: dict[str, str], body: str | None = None) -> str:
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
        sum(r.errors for r in results),
        mid([r.mean_ms for r in results]),
        sum(r.requests for r in results),
        mid([r.cpu_us for r in results]),
    )


def _token(gw: procs.Served) -> str:
    form = {"username": procs.USERNAME, "password": procs.PASSWORD}
    token: str = httpx.post(f"{gw.url}/api/v1/auth/token", data=form).json()["access_token"]
    return token


def _warm(gw: procs.Served, token: str, document: str, connections: int = 1) -> bytes:
    """The list endpoint waits for the full load: after it the index is warm. With several
    workers, fresh connections land on each of them."""
    auth = {"Authorization": f"Bearer {token}"}
    for _ in range(connections):
        with httpx.Client(headers=auth, timeout=120) as client:
            client.get(f"{gw.url}/api/v1/clients/").raise_for_status()
    sample = httpx.get(f"{gw.url}/api/v1/clients/by-document/{document}", headers=auth)
    sample.raise_for_status()
    return sample.content


# What a lookup would ask the upstream for (a miss, or a reload of the list it reads).
LOOKUP_ENDPOINT = "GET /api/clientes/"


def _upstream_calls(upstream: str) -> tuple[int, dict[str, int]]:
    """All upstream calls since the last reset, and their count by endpoint: the other lists
    kept warm (active tickets, routers, 60 s lifetimes) refresh on their own schedule."""
    stats = httpx.get(f"{upstream}/_sim/stats").json()
    return int(stats.get("total", 0)), dict(stats.get("calls", {}))


def _calls_line(total: int, by_endpoint: dict[str, int]) -> str:
    lookups = by_endpoint.get(LOOKUP_ENDPOINT, 0)
    others = ", ".join(f"{k} {v}" for k, v in by_endpoint.items() if k != LOOKUP_ENDPOINT)
    return (
        f"upstream calls while measured: {lookups} for the lookups ({LOOKUP_ENDPOINT}; "
        f"{_check('target 0', lookups == 0)}); {total} in all"
        + (f" (background refreshes on their schedule: {others})" if others else "")
    )


def _access_lines(log: Path) -> int:
    with log.open("rb") as handle:
        return sum(1 for line in handle if b"isp_gateway.access" in line)


@contextlib.contextmanager
def _log_file() -> Iterator[tuple[Path, IO[bytes]]]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gateway.log"
        with path.open("wb") as handle:
            yield path, handle


def _row(name: str, r: WrkResult) -> str:
    return (
        f"    {name:34}{r.rps:>9.0f}{r.p50_ms:>9.2f}{r.p99_ms:>9.2f}"
        f"{r.non_2xx:>9}{r.errors:>8}{r.cpu_us:>12.0f}"
    )


def _header() -> str:
    return (
        f"    {'':34}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'non-2xx':>9}{'errors':>8}"
        f"{'CPU us/req':>12}"
    )


def _check(label: str, ok: bool) -> str:
    return f"{label}: {'OK' if ok else 'MISSED'}"


def run(*, clients: int, duration: int, connections: int, rounds: int = 3) -> None:
    if no_wrk("(a)"):
        return
    print(
        f"(a) by-document lookups: {connections} connections, {duration} s a run, {rounds} "
        "rounds alternating the four rows (medians), 2,000 documents, "
        f"{clients:,} clients upstream"
    )
    print(
        f"    gateway = `isp-gateway serve` as shipped (SERVER={SERVER}, 1 process, INFO, "
        "access log on, written to a file); bare = Starlette returning the same body"
    )
    with (
        procs.simulator(clients) as upstream,
        _log_file() as (log_path, log),
        tempfile.TemporaryDirectory() as keys_dir,
    ):
        documents = _documents(upstream, 2000)
        # An API key with clients:read (CALLERS.md 3), beside the JWT on the same gateway.
        api_key = keys.generate_key()
        keys_file = Path(keys_dir) / "keys.json"
        # And one without clients:read, for the refused scope (403) below.
        scopeless_key = keys.generate_key()
        keys.write_key_entries(
            keys_file,
            [
                keys.new_entry(api_key, "bench", ["clients:read"], None),
                keys.new_entry(scopeless_key, "bench-plans", ["plans:read"], None),
            ],
        )
        with procs.gateway(upstream, log=log, API_KEYS_FILE=str(keys_file)) as gw:
            token = _token(gw)
            body = _warm(gw, token, documents[0])
            script = _lua(documents, token)
            key_script = _lua(documents, api_key, header="X-API-Key")
            with tempfile.NamedTemporaryFile("wb", suffix=".json", delete=False) as handle:
                handle.write(body)
            try:
                with (
                    procs.bare(handle.name, "uvicorn") as bare_uv,
                    procs.bare(handle.name, SERVER) as bare_srv,
                ):
                    targets = {
                        "gateway (serve, shipped default)": gw,
                        "bare Starlette, uvicorn": bare_uv,
                        f"bare Starlette, {SERVER}": bare_srv,
                        KEY_ROW: gw,
                    }
                    scripts = {name: script for name in targets}
                    scripts[KEY_ROW] = key_script
                    for name, target in targets.items():
                        wrk(target, scripts[name], 2, connections)  # warm-up
                    httpx.post(f"{upstream}/_sim/reset-stats").raise_for_status()
                    lines_before = _access_lines(log_path)
                    runs: dict[str, list[WrkResult]] = {name: [] for name in targets}
                    # The key's run next to the JWT's, first one then the other by turns: a
                    # gateway run after the bare servers' starts from an idle process.
                    jwt_row = next(iter(targets))
                    for round_ in range(rounds):
                        pair = [jwt_row, KEY_ROW] if round_ % 2 == 0 else [KEY_ROW, jwt_row]
                        bare_rows = [name for name in targets if name not in pair]
                        for name in [*pair, *bare_rows]:
                            run_ = wrk(targets[name], scripts[name], duration, connections)
                            runs[name].append(run_)
                    upstream_calls = _upstream_calls(upstream)
                    logged = _access_lines(log_path) - lines_before
                    bad_input = _bad_input(
                        gw, token, documents[0], connections, (api_key, scopeless_key), bare_srv
                    )
            finally:
                Path(handle.name).unlink()
        own_time = edge_cost.run_in_process(
            upstream, documents[0], keys_file, (api_key, scopeless_key)
        )
    results = {name: _median(r) for name, r in runs.items()}
    gw_r, uv_r, srv_r, _ = results.values()
    print(f"    body size {len(body)} bytes")
    print(_header())
    for name, r in results.items():
        print(_row(name, r))
    for name, r_list in runs.items():
        print(f"    per round req/s, {name}: " + ", ".join(f"{r.rps:.0f}" for r in r_list))
    to_uv = gw_r.rps / uv_r.rps if uv_r.rps else 0.0
    to_srv = gw_r.rps / srv_r.rps if srv_r.rps else 0.0
    # The gateway served both its rows (the JWT's and the key's).
    served = sum(r.rps for name in (next(iter(runs)), KEY_ROW) for r in runs[name]) * duration
    clean = all(r.non_2xx == 0 and r.errors == 0 for r in results.values())
    print(
        f"    ratio gateway / bare on uvicorn: {to_uv:.2f}x "
        f"({_check('target >= 1.2x', to_uv >= 1.2)})"
    )
    print(
        f"    ratio gateway / bare on {SERVER}: {to_srv:.2f}x "
        f"({_check('target >= 0.9x', to_srv >= 0.9)})"
    )
    print(f"    gateway p99 {gw_r.p99_ms:.2f} ms ({_check('target < 10 ms', gw_r.p99_ms < 10)})")
    # Each round's key run beside its JWT run of the same round (the load drifts between).
    jwt_runs = runs[next(iter(runs))]
    to_jwt = statistics.median(k.rps / j.rps for k, j in zip(runs[KEY_ROW], jwt_runs, strict=True))
    cpu_to_jwt = statistics.median(
        k.cpu_us / j.cpu_us for k, j in zip(runs[KEY_ROW], jwt_runs, strict=True)
    )
    print(
        f"    API key / JWT on the gateway: {to_jwt:.2f}x the req/s, {cpu_to_jwt:.2f}x the "
        f"server CPU a request ({_check('target <= 1.03x', cpu_to_jwt <= 1.03)})"
    )
    print(f"    {_calls_line(*upstream_calls)}")
    print(f"    non-2xx or socket errors, all runs: {_check('target none', clean)}")
    print(
        f"    access-log lines the gateway wrote while measured: {logged:,} "
        f"(~{served:,.0f} requests)"
    )
    print(
        f"  refusals on the gateway beside a cached lookup, {connections} connections, "
        f"{REFUSAL_ROUNDS} rounds, each case's {REFUSAL_SECONDS} s run beside one of the "
        "cached lookup (server CPU = the server's CPU time / requests answered; each ratio the "
        "median of the rounds' own, their spread beside it):"
    )
    for line in [*bad_input, *own_time]:
        print(line)


def _bad_input(
    gw: procs.Served,
    token: str,
    document: str,
    connections: int,
    keys_in_use: tuple[str, str],
    bare: procs.Served,
) -> list[str]:
    """The server CPU a request of each refusal (an unknown route, a bad token, a key without
    the route's scope, a malformed JSON body), and of the same cached lookup with an API key,
    beside the cached lookup with the JWT: each case's run right beside a run of the JWT
    lookup, one first then the other by turns. Each figure is the median of its rounds'
    ratios to that JWT run: a pair measured seconds apart shares the machine's load, which
    drifts more than these costs differ; the spread of the ratios is printed beside them."""
    api_key, scopeless_key = keys_in_use
    lookup = f"/api/v1/clients/by-document/{document}"
    cases = [
        ("cached lookup (JWT)", "GET", lookup, {"Authorization": f"Bearer {token}"}, None),
        ("cached lookup, API key", "GET", lookup, {"X-API-Key": api_key}, None),
        ("unknown route", "GET", "/api/v1/no-such-route", {}, None),
        ("bad token", "GET", lookup, {"Authorization": "Bearer not-a-valid-token"}, None),
        ("missing scope", "GET", lookup, {"X-API-Key": scopeless_key}, None),
        (
            "malformed JSON body",
            "POST",
            "/api/v1/clients/resolve",
            {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            '{"document": "123',
        ),
    ]
    statuses = {
        name: httpx.request(method, f"{gw.url}{path}", headers=headers, content=body).status_code
        for name, method, path, headers, body in cases
    }
    runs: dict[str, list[WrkResult]] = {name: [] for name, *_ in cases}
    ratios: dict[str, list[float]] = {name: [] for name, *_ in cases[1:]}
    # The server's own share of a body: the bare app on the same server, a GET beside a POST
    # of the same malformed body that it reads (a GET lookup reads none).
    malformed = cases[-1][4]
    bare_get = _lua_one("GET", "/api/v1/clients/by-document/1", {})
    bare_post = _lua_one("POST", "/read", {"Content-Type": "application/json"}, malformed)
    body_costs: list[float] = []
    base_name, *_, base_headers, _ = cases[0]
    base_script = _lua_one("GET", lookup, base_headers)
    for round_ in range(REFUSAL_ROUNDS):
        for name, method, path, headers, body in cases[1:]:
            # Each case right beside its own JWT lookup, first one then the other by turns.
            script = _lua_one(method, path, headers, body)
            pair = [(base_name, base_script), (name, script)]
            got = {
                which: wrk(gw, text, REFUSAL_SECONDS, connections)
                for which, text in (pair if round_ % 2 == 0 else pair[::-1])
            }
            runs[name].append(got[name])
            runs[base_name].append(got[base_name])
            ratios[name].append(got[name].cpu_us / got[base_name].cpu_us)
        got_bare = wrk(bare, bare_get, REFUSAL_SECONDS, connections).cpu_us
        posted = wrk(bare, bare_post, REFUSAL_SECONDS, connections).cpu_us
        body_costs.append(posted - got_bare)
    base = _median(runs[base_name]).cpu_us
    lines = []
    for name, *_ in cases:
        r = _median(runs[name])
        if name == base_name:
            target = ""
            shown = 1.0
        else:
            limit = 1.03 if name == "cached lookup, API key" else 1.0
            shown = statistics.median(ratios[name])
            spread = f"rounds {min(ratios[name]):.2f}-{max(ratios[name]):.2f}"
            target = f"; {spread}; {_check(f'target <= {limit:.2f}x', shown <= limit)}"
        lines.append(
            f"    {name:22} {statuses[name]}  {r.cpu_us:6.1f} us of server CPU a request, "
            f"{shown:.2f}x the cached lookup ({r.rps:.0f} req/s{target})"
        )
    # The 422 with the server's own read of the body taken off, round by round.
    net = statistics.median(
        (r.cpu_us - cut) / (r.cpu_us / ratio)
        for r, ratio, cut in zip(runs[cases[-1][0]], ratios[cases[-1][0]], body_costs, strict=True)
    )
    lines.append(
        f"    the server's own cost of reading that body (bare Starlette on {SERVER}, POST "
        f"reading it beside a GET): {statistics.median(body_costs):+.1f} us a request; the 422 "
        f"without it: {net:.2f}x the cached lookup"
    )
    lines.append(f"    (cached lookup with the JWT, median of the rounds: {base:.1f} us)")
    return lines


def run_workers(*, clients: int, duration: int, connections: int, workers: int = 2) -> None:
    if shutil.which("wrk") is None or shutil.which("redis-server") is None:
        print("(a2) skipped: needs wrk and redis-server")
        return
    print(
        f"(a2) `serve --workers {workers}` on a throwaway Redis, same lookups, "
        f"{connections} connections, {duration} s (on 2 cores: nothing breaks, not scaling)"
    )
    with (
        procs.simulator(clients) as upstream,
        procs.redis_server() as redis_url,
        _log_file() as (_, log),
        procs.gateway(
            upstream,
            "--workers",
            str(workers),
            log=log,
            REDIS_URL=redis_url,
        ) as gw,
    ):
        documents = _documents(upstream, 2000)
        token = _token(gw)
        _warm(gw, token, documents[0], connections=4 * workers)
        script = _lua(documents, token)
        wrk(gw, script, 3, connections)  # warm-up: each worker verifies the token once
        httpx.post(f"{upstream}/_sim/reset-stats").raise_for_status()
        result = wrk(gw, script, duration, connections)
        upstream_calls = _upstream_calls(upstream)
    print(_header())
    print(_row(f"gateway, {workers} workers, Redis", result))
    print(f"    {_calls_line(*upstream_calls)}")
    print(f"    non-2xx {result.non_2xx}, socket errors {result.errors}")
