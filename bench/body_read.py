"""(a3) the malformed body's 422 and the server's read of the body: the gateway served as
`serve` serves it, beside the same gateway behind a layer that hands the 422's body over at
once (as a server that had read it with the headers would) instead of through granian's
ASGI `receive`. Each answers the same cached lookup and the same malformed body, by turns;
the figure is each 422's server CPU a request beside its own gateway's lookup.

What it shows: how much of the 422's cost is the gateway's and how much is the server's
read, which no code of the gateway can leave out (CALLERS.md 6 "The cost of refusing").
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench import lookups, procs, wrk

RESOLVE = "/api/v1/clients/resolve"
MALFORMED = '{"document": "123'
ROUNDS = 5
SECONDS = 3
SHIPPED = "isp_gateway.app:create_app"
HANDED = "bench.body_read:handed_app"


def handed_app(settings: Any) -> Any:
    """The shipped app, its POSTs to resolve given the bench's malformed body at once."""
    from isp_gateway.app import create_app

    app = create_app(settings)
    message = {"type": "http.request", "body": MALFORMED.encode(), "more_body": False}

    async def at_once() -> dict[str, Any]:
        return message

    async def handed(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] == RESOLVE:
            await app(scope, at_once, send)
            return
        await app(scope, receive, send)

    return handed


@contextlib.contextmanager
def _served(upstream: str, factory: str, log: Any) -> Iterator[procs.Served]:
    """The gateway as `serve` runs it (its settings from the environment, granian, one
    process), built by `factory`; the same launch for both, so only the factory differs."""
    port = procs.free_port()
    code = (
        "from isp_gateway.serving import run; from isp_gateway.settings import load_settings; "
        f"run(load_settings(), '127.0.0.1', {port}, factory={factory!r})"
    )
    from isp_gateway.settings import Settings

    env = {**procs.gateway_env(upstream), "PYTHONPATH": str(Path(__file__).parent.parent)}
    # The shipped defaults, as procs.gateway: no setting from the caller's shell, no `.env`.
    shell = frozenset(Settings.model_fields)
    with (
        tempfile.TemporaryDirectory() as cwd,
        procs.process([sys.executable, "-c", code], env, log, drop=shell, cwd=cwd) as proc,
    ):
        url = f"http://127.0.0.1:{port}"
        procs.wait_until(f"{url}/health")
        yield procs.Served(url, proc.pid)


def run(*, clients: int, connections: int) -> None:
    if wrk.no_wrk("(a3)"):
        return
    print(
        f"(a3) the 422 of a malformed body and the server's read: {connections} connections, "
        f"{ROUNDS} rounds of {SECONDS} s a case, the gateway as served beside the same gateway "
        "given the body at once (server CPU a request, each 422 beside its own gateway's "
        "cached lookup; medians of the rounds' ratios)"
    )
    ratios: dict[str, list[float]] = {SHIPPED: [], HANDED: []}
    cpu: dict[str, list[float]] = {SHIPPED: [], HANDED: []}
    with (
        procs.simulator(clients) as upstream,
        lookups._log_file() as (_, log),
        _served(upstream, SHIPPED, log) as shipped,
        _served(upstream, HANDED, log) as handed,
    ):
        document = lookups._documents(upstream, 1)[0]
        gateways = {SHIPPED: shipped, HANDED: handed}
        scripts: dict[str, tuple[str, str]] = {}
        for factory, gw in gateways.items():
            token = lookups._token(gw)
            lookups._warm(gw, token, document)
            bearer = {"Authorization": f"Bearer {token}"}
            lookup = wrk.request_script("GET", f"/api/v1/clients/by-document/{document}", bearer)
            json_body = {**bearer, "Content-Type": "application/json"}
            malformed = wrk.request_script("POST", RESOLVE, json_body, MALFORMED)
            scripts[factory] = (lookup, malformed)
            for script in scripts[factory]:
                wrk.wrk(gw, script, 1, connections)  # warm-up
        for round_ in range(ROUNDS):
            order = list(gateways) if round_ % 2 == 0 else list(gateways)[::-1]
            for factory in order:
                lookup, malformed = scripts[factory]
                got_lookup = wrk.wrk(gateways[factory], lookup, SECONDS, connections).cpu_us
                got_422 = wrk.wrk(gateways[factory], malformed, SECONDS, connections).cpu_us
                ratios[factory].append(got_422 / got_lookup)
                cpu[factory].append(got_422)
    for factory, label in ((SHIPPED, "as served"), (HANDED, "given the body at once")):
        shown = statistics.median(ratios[factory])
        print(
            f"    422, {label:24} {statistics.median(cpu[factory]):5.1f} us of server CPU a "
            f"request, {shown:.2f}x its cached lookup (rounds {min(ratios[factory]):.2f}-"
            f"{max(ratios[factory]):.2f})"
        )
