"""`isp-gateway` command line: serve · demo · simulator · hash-password · check-config · keys ·
webhooks."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from isp_gateway.cli.demo import DEMO_PORT, cmd_demo, cmd_simulator
from isp_gateway.cli.keys import MIN_PASSWORD_CHARS, cmd_hash_password, cmd_keys, scopes_epilog
from isp_gateway.cli.serve import app_from_env, cmd_check_config, cmd_serve
from isp_gateway.cli.webhooks import add_parser as add_webhooks_parser

__all__ = ["app_from_env", "build_parser", "main"]


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's help ends with its default, unless it names it already: `(default:
    8000)`, `(default: off)` for a flag, `(default: none)`. Descriptions and epilogs keep
    their lines (the scopes of `keys create`)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if not action.option_strings or action.required or "default" in text.lower():
            return text
        if action.default is argparse.SUPPRESS:
            return text
        if isinstance(action, argparse._StoreTrueAction):
            return f"{text} (default: off)"
        if action.default is None:
            return f"{text} (default: none)"
        return f"{text} (default: %(default)s)"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("isp-gateway")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="isp-gateway", description=__doc__, formatter_class=HelpFormatter
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {_version()}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help: str, **kw: Any) -> argparse.ArgumentParser:
        return sub.add_parser(
            name, help=help, description=help, formatter_class=HelpFormatter, **kw
        )

    serve = command("serve", "run the gateway (settings from the environment and .env)")
    serve.add_argument(
        "--host",
        default=None,
        help="the address to listen on (default: ISP_GATEWAY_HOST, 127.0.0.1)",
    )
    serve.add_argument(
        "--port",
        type=int,
        default=None,
        help="the port to listen on (default: ISP_GATEWAY_PORT, 8000)",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="worker processes; more than one shares the state through REDIS_URL or "
        "REDIS_SENTINELS",
    )
    serve.add_argument(
        "--proxy-headers",
        action="store_true",
        help="trust X-Forwarded-For and -Proto from FORWARDED_ALLOW_IPS (behind nginx)",
    )
    serve.set_defaults(func=cmd_serve)

    demo = command("demo", "simulator + gateway on loopback, generated secrets")
    demo.add_argument("--host", default="127.0.0.1", help="the gateway's address")
    demo.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"the gateway's port (default: {DEMO_PORT}, or a free one if taken)",
    )
    demo.add_argument(
        "--simulator-port", type=int, default=0, help="the simulator's port (default: a free one)"
    )
    demo.add_argument("--clients", type=int, default=2000, help="clients the simulator generates")
    demo.add_argument("--seed", type=int, default=1, help="the simulator's data seed")
    demo.add_argument(
        "--latency", default="0.3,0.6", help="simulated upstream latency MIN,MAX seconds"
    )
    demo.set_defaults(func=cmd_demo)

    sim = command("simulator", "serve a WispHub-compatible upstream (SIMULATOR_API_KEY)")
    sim.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    from isp_gateway.simulator import add_simulator_arguments

    add_simulator_arguments(sim)
    sim.set_defaults(func=cmd_simulator)

    hashpw = command(
        "hash-password",
        f"print a bcrypt hash of a password (at least {MIN_PASSWORD_CHARS} characters) read "
        "from a prompt or stdin, for API_PASSWORD_HASH",
    )
    hashpw.add_argument("refused_argv", nargs="*", help=argparse.SUPPRESS)
    hashpw.set_defaults(func=cmd_hash_password)

    check = command("check-config", "validate the environment's settings")
    check.add_argument(
        "--probe",
        action="store_true",
        help="also reach what they name: the upstream (one page of one client, with the real "
        "key), Redis or each sentinel and the master they name, and API_KEYS_FILE; one line a "
        "check, exit 1 naming each failure (run it as the service's user)",
    )
    check.set_defaults(func=cmd_check_config)

    keys_cmd = command("keys", "create, list or revoke API keys (API_KEYS_FILE)")
    keys_sub = keys_cmd.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser(
        "create",
        help="make a key; it is printed once",
        description="Make an API key and print it, once (only its SHA-256 is stored in\n"
        "API_KEYS_FILE). A running service accepts it within 5 s.",
        epilog=scopes_epilog(),
        formatter_class=HelpFormatter,
    )
    create.add_argument("name", help="the key's name: its caller id in logs and the audit")
    create.add_argument(
        "--scopes",
        required=True,
        help="comma-separated, e.g. clients:read,clients:verify; * = all (listed below)",
    )
    create.add_argument(
        "--rate-per-minute",
        type=int,
        default=None,
        help="the key's own cap of requests a minute (default: none, only the service's)",
    )
    keys_sub.add_parser(
        "list", help="names, scopes, rates and creation times", formatter_class=HelpFormatter
    )
    revoke = keys_sub.add_parser(
        "revoke", help="remove a key by name", formatter_class=HelpFormatter
    )
    revoke.add_argument("name", help="the name of the key to remove")
    keys_cmd.set_defaults(func=cmd_keys)
    add_webhooks_parser(sub, HelpFormatter)
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
