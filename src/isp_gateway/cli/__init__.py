"""`isp-gateway` command line: serve · demo · simulator · hash-password · check-config · keys ·
webhooks."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from isp_gateway.cli.demo import DEMO_PORT, cmd_demo, cmd_simulator
from isp_gateway.cli.keys import cmd_hash_password, cmd_keys
from isp_gateway.cli.serve import app_from_env, cmd_check_config, cmd_serve
from isp_gateway.cli.webhooks import add_parser as add_webhooks_parser

__all__ = ["app_from_env", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="isp-gateway", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the gateway (settings from the environment)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--workers", type=int, default=1)
    serve.add_argument(
        "--proxy-headers", action="store_true", help="trust X-Forwarded-For from the reverse proxy"
    )
    serve.set_defaults(func=cmd_serve)

    demo = sub.add_parser("demo", help="simulator + gateway on loopback, generated secrets")
    demo.add_argument("--host", default="127.0.0.1")
    demo.add_argument(
        "--port", type=int, default=None, help=f"default {DEMO_PORT}, or a free one if taken"
    )
    demo.add_argument("--simulator-port", type=int, default=0)
    demo.add_argument("--clients", type=int, default=2000)
    demo.add_argument("--seed", type=int, default=1)
    demo.add_argument(
        "--latency", default="0.3,0.6", help="simulated upstream latency MIN,MAX seconds"
    )
    demo.set_defaults(func=cmd_demo)

    sim = sub.add_parser("simulator", help="serve a WispHub-compatible upstream")
    sim.add_argument("--host", default="127.0.0.1")
    from isp_gateway.simulator import add_simulator_arguments

    add_simulator_arguments(sim)
    sim.set_defaults(func=cmd_simulator)

    hashpw = sub.add_parser(
        "hash-password", help="print a bcrypt hash of a password read from a prompt/stdin"
    )
    hashpw.add_argument("refused_argv", nargs="*", help=argparse.SUPPRESS)
    hashpw.set_defaults(func=cmd_hash_password)

    check = sub.add_parser("check-config", help="validate the environment's settings")
    check.set_defaults(func=cmd_check_config)

    keys_cmd = sub.add_parser("keys", help="create, list or revoke API keys (API_KEYS_FILE)")
    keys_sub = keys_cmd.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="make a key; it is printed once")
    create.add_argument("name", help="the key's name: its caller id in logs and the audit")
    create.add_argument(
        "--scopes", required=True, help="comma-separated, e.g. clients:read,clients:verify; * = all"
    )
    create.add_argument("--rate-per-minute", type=int, default=None, help="the key's own cap")
    keys_sub.add_parser("list", help="names, scopes, rates and creation times")
    revoke = keys_sub.add_parser("revoke", help="remove a key by name")
    revoke.add_argument("name")
    keys_cmd.set_defaults(func=cmd_keys)
    add_webhooks_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    try:
        result: int = ns.func(ns)
    except KeyboardInterrupt:
        return 130
    return result


if __name__ == "__main__":
    sys.exit(main())
