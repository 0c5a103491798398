"""`make bench` / `python -m bench`: the gateway's performance figures, with baselines.

(a) by-document lookups, 32 connections for 10 s (wrk), gateway vs a bare Starlette app
    serving a same-sized body from memory, both under uvicorn with the same settings, with
    the upstream calls the gateway made during the run (read from the simulator);
(b) search latency over 50,000 clients, single- and multi-token queries;
(c) time and peak memory to load and index 50,000 clients, beside the upstream's own time;
(d) accounts: the pending-invoice list (20,000 invoices) loaded beside the upstream's own
    time, and the account answer's p50/p99 in-process once warm;
(e) scale: 200,000 clients behind the upstream's own 100 calls a minute (bench/scale.py).
"""

from __future__ import annotations

import argparse
import sys

from bench import accounts, indexing, lookups, scale


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--only", choices=["lookups", "search", "load", "accounts", "scale"], default=None
    )
    parser.add_argument("--duration", type=int, default=10, help="seconds per wrk run")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3, help="alternating wrk runs for (a)")
    parser.add_argument("--clients", type=int, default=20_000, help="clients for (a)")
    parser.add_argument("--index-clients", type=int, default=50_000, help="clients for (b)/(c)")
    parser.add_argument("--scale-clients", type=int, default=200_000, help="clients for (e)")
    ns = parser.parse_args()
    if ns.only in (None, "lookups"):
        lookups.run(
            clients=ns.clients,
            duration=ns.duration,
            connections=ns.connections,
            rounds=ns.rounds,
        )
    if ns.only in (None, "search"):
        indexing.run_search(clients=ns.index_clients)
    if ns.only in (None, "load"):
        indexing.run_load(clients=ns.index_clients)
    if ns.only in (None, "accounts"):
        accounts.run(clients=ns.index_clients)
    if ns.only in (None, "scale"):
        scale.run(clients=ns.scale_clients)
    return 0


if __name__ == "__main__":
    sys.exit(main())
