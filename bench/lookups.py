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
import random
import shutil
import statistics
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import httpx

from bench import edge_cost, procs, refusals, wrk
from isp_gateway.auth import keys

# The same lookups on the same gateway with an API key (X-API-Key) instead of the JWT.
KEY_ROW = "gateway, API key (X-API-Key)"


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
        f"{wrk.check('target 0', lookups == 0)}); {total} in all"
        + (f" (background refreshes on their schedule: {others})" if others else "")
    )


def _access_lines(log: Path) -> int:
    with log.open("rb") as handle:
        return sum(1 for line in handle if b"isp_gateway.access" in line)


def _bench_keys(keys_dir: str) -> tuple[Path, tuple[str, str]]:
    """A keys file in `keys_dir` and its two keys: one with clients:read (CALLERS.md 3), for
    the lookups beside the JWT's, and one without it, for the refused scope (403)."""
    api_key, scopeless_key = keys.generate_key(), keys.generate_key()
    keys_file = Path(keys_dir) / "keys.json"
    keys.write_key_entries(
        keys_file,
        [
            keys.new_entry(api_key, "bench", ["clients:read"], None),
            keys.new_entry(scopeless_key, "bench-plans", ["plans:read"], None),
        ],
    )
    return keys_file, (api_key, scopeless_key)


@contextlib.contextmanager
def _log_file() -> Iterator[tuple[Path, IO[bytes]]]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gateway.log"
        with path.open("wb") as handle:
            yield path, handle


def run(*, clients: int, duration: int, connections: int, rounds: int = 3) -> None:
    if wrk.no_wrk("(a)"):
        return
    print(
        f"(a) by-document lookups: {connections} connections, {duration} s a run, {rounds} "
        "rounds alternating the four rows (medians), 2,000 documents, "
        f"{clients:,} clients upstream"
    )
    print(
        f"    gateway = `isp-gateway serve` as shipped (SERVER={procs.SERVER}, 1 process, INFO, "
        "access log on, written to a file); bare = Starlette returning the same body"
    )
    with (
        procs.simulator(clients) as upstream,
        _log_file() as (log_path, log),
        tempfile.TemporaryDirectory() as keys_dir,
    ):
        documents = _documents(upstream, 2000)
        keys_file, (api_key, scopeless_key) = _bench_keys(keys_dir)
        with procs.gateway(upstream, log=log, API_KEYS_FILE=str(keys_file)) as gw:
            token = _token(gw)
            body = _warm(gw, token, documents[0])
            script = wrk.lookup_script(documents, token)
            key_script = wrk.lookup_script(documents, api_key, header="X-API-Key")
            with tempfile.NamedTemporaryFile("wb", suffix=".json", delete=False) as handle:
                handle.write(body)
            try:
                with (
                    procs.bare(handle.name, "uvicorn") as bare_uv,
                    procs.bare(handle.name, procs.SERVER) as bare_srv,
                ):
                    targets = {
                        "gateway (serve, shipped default)": gw,
                        "bare Starlette, uvicorn": bare_uv,
                        f"bare Starlette, {procs.SERVER}": bare_srv,
                        KEY_ROW: gw,
                    }
                    scripts = {name: script for name in targets}
                    scripts[KEY_ROW] = key_script
                    for name, target in targets.items():
                        wrk.wrk(target, scripts[name], 2, connections)  # warm-up
                    httpx.post(f"{upstream}/_sim/reset-stats").raise_for_status()
                    lines_before = _access_lines(log_path)
                    runs: dict[str, list[wrk.WrkResult]] = {name: [] for name in targets}
                    # The key's run next to the JWT's, first one then the other by turns: a
                    # gateway run after the bare servers' starts from an idle process.
                    jwt_row = next(iter(targets))
                    for round_ in range(rounds):
                        pair = [jwt_row, KEY_ROW] if round_ % 2 == 0 else [KEY_ROW, jwt_row]
                        bare_rows = [name for name in targets if name not in pair]
                        for name in [*pair, *bare_rows]:
                            run_ = wrk.wrk(targets[name], scripts[name], duration, connections)
                            runs[name].append(run_)
                    upstream_calls = _upstream_calls(upstream)
                    logged = _access_lines(log_path) - lines_before
                    bad_input = refusals.measure(
                        gw, token, documents[0], connections, (api_key, scopeless_key), bare_srv
                    )
            finally:
                Path(handle.name).unlink()
        own_time = edge_cost.run_in_process(
            upstream, documents[0], keys_file, (api_key, scopeless_key)
        )
    results = {name: wrk.median(r) for name, r in runs.items()}
    gw_r, uv_r, srv_r, _ = results.values()
    print(f"    body size {len(body)} bytes")
    print(wrk.header())
    for name, r in results.items():
        print(wrk.row(name, r))
    for name, r_list in runs.items():
        print(f"    per round req/s, {name}: " + ", ".join(f"{r.rps:.0f}" for r in r_list))
    to_uv = gw_r.rps / uv_r.rps if uv_r.rps else 0.0
    to_srv = gw_r.rps / srv_r.rps if srv_r.rps else 0.0
    # The gateway served both its rows (the JWT's and the key's).
    served = sum(r.rps for name in (next(iter(runs)), KEY_ROW) for r in runs[name]) * duration
    clean = all(r.non_2xx == 0 and r.errors == 0 for r in results.values())
    print(
        f"    ratio gateway / bare on uvicorn: {to_uv:.2f}x "
        f"({wrk.check('target >= 1.2x', to_uv >= 1.2)})"
    )
    print(
        f"    ratio gateway / bare on {procs.SERVER}: {to_srv:.2f}x "
        f"({wrk.check('target >= 0.9x', to_srv >= 0.9)})"
    )
    print(f"    gateway p99 {gw_r.p99_ms:.2f} ms ({wrk.check('target < 10 ms', gw_r.p99_ms < 10)})")
    # Each round's key run beside its JWT run of the same round (the load drifts between).
    jwt_runs = runs[next(iter(runs))]
    to_jwt = statistics.median(k.rps / j.rps for k, j in zip(runs[KEY_ROW], jwt_runs, strict=True))
    cpu_to_jwt = statistics.median(
        k.cpu_us / j.cpu_us for k, j in zip(runs[KEY_ROW], jwt_runs, strict=True)
    )
    print(
        f"    API key / JWT on the gateway: {to_jwt:.2f}x the req/s, {cpu_to_jwt:.2f}x the "
        f"server CPU a request ({wrk.check('target <= 1.03x', cpu_to_jwt <= 1.03)})"
    )
    print(f"    {_calls_line(*upstream_calls)}")
    print(f"    non-2xx or socket errors, all runs: {wrk.check('target none', clean)}")
    print(
        f"    access-log lines the gateway wrote while measured: {logged:,} "
        f"(~{served:,.0f} requests)"
    )
    print(
        f"  refusals on the gateway beside a cached lookup, {connections} connections, "
        f"{refusals.ROUNDS} rounds, each case's {refusals.SECONDS} s run beside one of the "
        "cached lookup (server CPU = the server's CPU time / requests answered; each ratio the "
        "median of the rounds' own, their spread beside it):"
    )
    for line in [*bad_input, *own_time]:
        print(line)


def run_refusals_on(server: str, *, clients: int, connections: int) -> None:
    """(a4) the refusals of (a) on the other server `serve` ships (SERVER=uvicorn), beside
    its own cached lookup: each server reads a request body its own way (granian in a task
    of its own runtime that takes the GIL from another thread, uvicorn in the event loop
    with the headers), and the malformed body's 422 is the refusal that reads one."""
    if wrk.no_wrk("(a4)"):
        return
    print(
        f"(a4) the refusals of (a) with SERVER={server} (all else shipped), {connections} "
        f"connections, {refusals.ROUNDS} rounds, each case's {refusals.SECONDS} s run beside "
        "one of the cached lookup (server CPU a request; medians of the rounds' ratios)"
    )
    with (
        procs.simulator(clients) as upstream,
        _log_file() as (_, log),
        tempfile.TemporaryDirectory() as keys_dir,
    ):
        document = _documents(upstream, 1)[0]
        keys_file, (api_key, scopeless_key) = _bench_keys(keys_dir)
        with procs.gateway(upstream, log=log, API_KEYS_FILE=str(keys_file), SERVER=server) as gw:
            token = _token(gw)
            body = _warm(gw, token, document)
            with tempfile.NamedTemporaryFile("wb", suffix=".json", delete=False) as handle:
                handle.write(body)
            try:
                with procs.bare(handle.name, server) as bare:
                    lines = refusals.measure(
                        gw, token, document, connections, (api_key, scopeless_key), bare, server
                    )
            finally:
                Path(handle.name).unlink()
    for line in lines:
        print(line)


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
        script = wrk.lookup_script(documents, token)
        wrk.wrk(gw, script, 3, connections)  # warm-up: each worker verifies the token once
        httpx.post(f"{upstream}/_sim/reset-stats").raise_for_status()
        result = wrk.wrk(gw, script, duration, connections)
        upstream_calls = _upstream_calls(upstream)
    print(wrk.header())
    print(wrk.row(f"gateway, {workers} workers, Redis", result))
    print(f"    {_calls_line(*upstream_calls)}")
    print(f"    non-2xx {result.non_2xx}, socket errors {result.errors}")
