"""`make bench` / `python -m bench`: the gateway's performance figures, with baselines.

(a)  by-document lookups, 32 connections for 10 s a run (wrk): the gateway exactly as
     `isp-gateway serve` ships, beside a bare Starlette app on uvicorn and on the same
     server, alternating; the upstream calls made while measured; the server time of an
     unknown route, a bad token, a key without the scope, a malformed JSON body and an API
     key's lookup, each beside the JWT's; and the gateway's own time of each in-process;
(a2) `serve --workers 2` on a throwaway Redis, the same lookups;
(a3) the malformed body's 422, served as shipped beside the same gateway given the body at
     once: how much of its cost is the server's read of the body (bench/body_read.py);
(a4) the same refusals beside a cached lookup with SERVER=uvicorn, the other server `serve`
     ships, which reads a body in the event loop;
(b)  search latency over 50,000 clients, single- and multi-token queries;
(c)  time and peak memory to load and index 50,000 clients, beside the upstream's own time;
(d)  accounts: the pending-invoice list (20,000 invoices) loaded beside the upstream's own
     time, and the account answer's p50/p99 in-process once warm;
(e)  a bot's "no internet" conversation on warm caches (find by phone, verify, account,
     diagnose, open a ticket) with the upstream calls of each step;
(f)  the cost of metrics: workload (a) with METRICS_ENABLED on and off, alternating;
(g)  scale: 200,000 clients behind the upstream's own 100 calls a minute (bench/scale.py);
(h)  agents: an MCP tool call's server time beside the same REST call (find by document,
     account), and ticket creation's p50 with the audit on and off (bench/agents.py);
(i)  outage notices: the delay from a router's flag flipping to the signed notice's delivery,
     and the cost of one sweep of the router catalogue with notices on and off
     (bench/outages.py);
(j)  money: a payment promise's and a payment report's server time, and the upstream calls
     each costs, cold and warm (bench/money.py).

A new part: a module in bench/ with a `run(ns)` function, added to PARTS below.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from bench import (
    accounts,
    agents,
    body_read,
    conversation,
    indexing,
    lookups,
    metrics,
    money,
    outages,
    scale,
)

PARTS: dict[str, Callable[[argparse.Namespace], None]] = {
    "lookups": lambda ns: lookups.run(
        clients=ns.clients, duration=ns.duration, connections=ns.connections, rounds=ns.rounds
    ),
    "workers": lambda ns: lookups.run_workers(
        clients=ns.clients, duration=ns.duration, connections=ns.connections
    ),
    "refusals-uvicorn": lambda ns: lookups.run_refusals_on(
        "uvicorn", clients=ns.clients, connections=ns.connections
    ),
    "body-read": lambda ns: body_read.run(clients=ns.clients, connections=ns.connections),
    "search": lambda ns: indexing.run_search(clients=ns.index_clients),
    "load": lambda ns: indexing.run_load(clients=ns.index_clients),
    "accounts": lambda ns: accounts.run(clients=ns.index_clients),
    "conversation": lambda ns: conversation.run(),
    "metrics": lambda ns: metrics.run(
        clients=ns.clients, duration=ns.duration, connections=ns.connections, rounds=ns.rounds
    ),
    "scale": lambda ns: scale.run(clients=ns.scale_clients),
    "agents": lambda ns: agents.run(),
    "outages": lambda ns: outages.run(clients=ns.index_clients),
    "money": lambda ns: money.run(),
}


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--only", choices=list(PARTS), action="append", default=None)
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3, help="alternating wrk runs for (a)")
    parser.add_argument("--clients", type=int, default=20_000, help="clients for (a)")
    parser.add_argument("--index-clients", type=int, default=50_000, help="clients for (b)/(c)")
    parser.add_argument("--scale-clients", type=int, default=200_000, help="clients for (g)")
    ns = parser.parse_args()
    for name, part in PARTS.items():
        if ns.only is None or name in ns.only:
            part(ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
