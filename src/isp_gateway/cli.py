"""`isp-gateway` command line: serve · demo · simulator · hash-password · check-config · keys."""

from __future__ import annotations

import argparse
import getpass
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

EXIT_CONFIG = 2
DEMO_PORT = 8000


def _configure_logging(level: str, fmt: str = "text") -> None:
    from isp_gateway.logs import configure_logging

    configure_logging(level, fmt)


def _load_settings_or_exit(**overrides: Any) -> Any:
    from isp_gateway.settings import ConfigurationError, load_settings

    try:
        return load_settings(**overrides)
    except ConfigurationError as exc:
        print(f"isp-gateway: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None


def _check_redis_or_exit(settings: Any) -> None:
    """Reach Redis before the server starts: a failure inside the lifespan would end start-up
    with the server's traceback instead of one line naming the setting."""
    import asyncio

    from isp_gateway.app import redis_store

    async def ping() -> None:
        store = redis_store(settings)
        try:
            await asyncio.wait_for(store.ping(), 10)
        finally:
            await store.close()

    try:
        asyncio.run(ping())
    except Exception as exc:
        # redis-py's messages name hosts and ports (and a master's name), never a password.
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        where = (
            "the Redis of REDIS_URL"
            if settings.REDIS_URL is not None
            else f"the Redis master {settings.REDIS_SENTINEL_MASTER!r} through REDIS_SENTINELS"
        )
        print(f"isp-gateway: cannot reach {where} ({reason})", file=sys.stderr)
        raise SystemExit(1) from None


def _check_metrics_port_or_exit(host: str, port: int, api_port: int) -> None:
    """The workers share METRICS_PORT (SO_REUSEPORT, observability/exporter.py), which would
    as gladly share it with another process listening there: checked free first."""
    if port == api_port:
        print(
            f"isp-gateway: METRICS_PORT {port} is the API port (--port); choose another",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_CONFIG)
    with socket.socket() as sock:
        # SO_REUSEADDR as the workers bind it: a closed scrape's TIME_WAIT is no listener.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            print(
                f"isp-gateway: cannot listen on METRICS_HOST:METRICS_PORT {host}:{port} "
                f"({exc.strerror or exc})",
                file=sys.stderr,
            )
            raise SystemExit(1) from None


def cmd_serve(ns: argparse.Namespace) -> int:
    from isp_gateway import serving
    from isp_gateway.observability import workers as metrics_workers

    settings = _load_settings_or_exit()
    _configure_logging(settings.LOG_LEVEL, settings.LOG_FORMAT)
    if settings.uses_redis:
        _check_redis_or_exit(settings)
    if settings.METRICS_ENABLED and settings.METRICS_PORT is not None:
        _check_metrics_port_or_exit(settings.METRICS_HOST, settings.METRICS_PORT, ns.port)
    # Each worker builds its own app from the environment; with several workers, a Redis
    # (REDIS_URL or REDIS_SENTINELS) makes locks, caches and throttles shared.
    metrics_workers.prepare_metrics_dir(settings, ns.workers)  # before any worker starts
    serving.log_worker_warning(settings, ns.workers)
    serving.run(settings, ns.host, ns.port, workers=ns.workers, proxy_headers=ns.proxy_headers)
    return 0


def app_from_env() -> Any:
    """uvicorn factory for multi-worker serving: each worker reads the environment."""
    from isp_gateway.serving import WorkerApp

    return WorkerApp()()


def cmd_check_config(ns: argparse.Namespace) -> int:
    settings = _load_settings_or_exit()
    print(f"configuration OK; upstream {settings.UPSTREAM_NET_HOST}")
    return 0


def cmd_hash_password(ns: argparse.Namespace) -> int:
    from isp_gateway.auth.passwords import hash_password

    # Read from a prompt or stdin, never argv: argv is visible to every user via `ps`.
    if ns.refused_argv:
        # Caught here rather than by argparse, whose error would print the password back.
        print(
            "isp-gateway: a password on the command line is refused (it shows in `ps` and "
            "shell history); type it at the prompt or pipe it on stdin",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    if sys.stdin.isatty():
        password = getpass.getpass("Password: ")
        if getpass.getpass("Repeat: ") != password:
            print("isp-gateway: passwords do not match", file=sys.stderr)
            return 1
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        print("isp-gateway: empty password", file=sys.stderr)
        return 1
    if len(password.encode()) > 72:
        print("isp-gateway: bcrypt uses at most 72 bytes of a password", file=sys.stderr)
        return 1
    print(hash_password(password))
    return 0


def _keys_file_or_exit() -> Any:
    """API_KEYS_FILE from the environment or .env, alone: managing keys needs no other
    setting (the service's secrets need not be present where keys are made)."""
    from pathlib import Path

    from pydantic_settings import BaseSettings, SettingsConfigDict

    class KeysFile(BaseSettings):
        model_config = SettingsConfigDict(
            env_file=".env", env_file_encoding="utf-8", case_sensitive=True, extra="ignore"
        )
        API_KEYS_FILE: str = ""

    value = KeysFile().API_KEYS_FILE.strip()
    if not value:
        print(
            "isp-gateway: API_KEYS_FILE is not set; set it (in the environment or .env) to "
            "the JSON file that holds the API keys, e.g. API_KEYS_FILE=/etc/isp-gateway/keys.json",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_CONFIG)
    return Path(value)


def cmd_keys(ns: argparse.Namespace) -> int:
    from isp_gateway.auth import keys

    path = _keys_file_or_exit()
    try:
        entries = keys.read_key_entries(path)
    except keys.KeyFileError as exc:
        print(f"isp-gateway: API_KEYS_FILE {exc}; nothing changed", file=sys.stderr)
        return 1
    if ns.keys_command == "list":
        if not entries:
            print(f"no API keys in {path}")
            return 0
        rows = [
            (
                e["name"],
                ",".join(e["scopes"]),
                str(e["rate_per_minute"]) if e.get("rate_per_minute") else "-",
                e["created_at"],
            )
            for e in entries
        ]
        header = ("NAME", "SCOPES", "RATE/MIN", "CREATED")
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
        for row in [header, *rows]:
            print(
                "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
                + "  "
                + row[3]
            )
        return 0
    names = [e["name"] for e in entries]
    if ns.keys_command == "revoke":
        if ns.name not in names:
            print(f"isp-gateway: no API key named {ns.name!r} in {path}", file=sys.stderr)
            return EXIT_CONFIG
        try:
            keys.write_key_entries(path, [e for e in entries if e["name"] != ns.name])
        except OSError as exc:
            print(f"isp-gateway: cannot write {path} ({type(exc).__name__})", file=sys.stderr)
            return 1
        print(f"revoked {ns.name}; running services stop accepting it within 5 s")
        return 0
    # create
    if not keys.NAME_PATTERN.fullmatch(ns.name):
        print(
            f"isp-gateway: invalid key name {ns.name!r}: 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    if ns.name in names:
        print(
            f"isp-gateway: an API key named {ns.name!r} already exists; revoke it first or "
            "choose another name",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    scopes = [part.strip() for part in ns.scopes.split(",") if part.strip()]
    unknown = [scope for scope in scopes if scope not in keys.KNOWN_SCOPES]
    if not scopes or unknown:
        problem = f"unknown scope {', '.join(unknown)}" if unknown else "no scope given"
        choices = ", ".join((*keys.SCOPES, keys.ALL_SCOPES))
        print(f"isp-gateway: {problem}; choose from {choices}", file=sys.stderr)
        return EXIT_CONFIG
    if ns.rate_per_minute is not None and ns.rate_per_minute < 1:
        print("isp-gateway: --rate-per-minute must be at least 1", file=sys.stderr)
        return EXIT_CONFIG
    key = keys.generate_key()
    entry = keys.new_entry(key, ns.name, scopes, ns.rate_per_minute)
    try:
        keys.write_key_entries(path, [*entries, entry])
    except OSError as exc:
        print(f"isp-gateway: cannot write {path} ({type(exc).__name__})", file=sys.stderr)
        return 1
    print(key)
    print(
        f"(API key {ns.name!r} created; this is the only time it is shown. Send it as "
        "X-API-Key or Authorization: Bearer.)",
        file=sys.stderr,
    )
    return 0


def cmd_simulator(ns: argparse.Namespace) -> int:
    from isp_gateway.simulator import config_from_args, serve_simulator

    api_key = os.environ.get("SIMULATOR_API_KEY") or os.environ.get("UPSTREAM_NET_KEY")
    if not api_key:
        print(
            "isp-gateway: set SIMULATOR_API_KEY (or UPSTREAM_NET_KEY) for the simulator",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    _configure_logging("WARNING")
    from isp_gateway.simulator.dataset import DataFileError

    try:
        serve_simulator(config_from_args(ns, api_key), ns.host, ns.port)
    except DataFileError as exc:  # raised while loading --data, before serving
        print(f"isp-gateway: simulator data file {exc}", file=sys.stderr)
        return EXIT_CONFIG
    return 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _wait_http(url: str, headers: dict[str, str], deadline: float) -> Any:
    import httpx

    while time.monotonic() < deadline:
        try:
            response = httpx.get(url, headers=headers, timeout=2)
            if response.status_code == 200:
                return response.json()
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer in time")


def cmd_demo(ns: argparse.Namespace) -> int:
    from isp_gateway import serving
    from isp_gateway.auth.passwords import hash_password

    port = ns.port if ns.port is not None else DEMO_PORT
    if not _port_free(ns.host, port):
        if ns.port is not None:
            print(
                f"isp-gateway: {ns.host}:{port} is already in use; choose another --port",
                file=sys.stderr,
            )
            return 1
        # The default port is taken (another service, an earlier demo): printing its URLs
        # and credentials, then failing to bind, would point the user at someone else.
        port = _free_port()
        print(f"(port {DEMO_PORT} is in use; the demo listens on {port} instead)", flush=True)
    api_key = secrets.token_urlsafe(24)
    sim_port = ns.simulator_port or _free_port()
    sim = subprocess.Popen(  # noqa: S603 - our own interpreter and module, fixed args
        [
            sys.executable,
            "-m",
            "isp_gateway",
            "simulator",
            "--port",
            str(sim_port),
            "--clients",
            str(ns.clients),
            "--seed",
            str(ns.seed),
            "--answer-cases",
            *(["--latency", ns.latency] if ns.latency else []),
        ],
        env={**os.environ, "SIMULATOR_API_KEY": api_key},
        # Its own process group: a terminal's Ctrl-C reaches only us, and we stop it with
        # one SIGINT. Two (the terminal's and ours) make uvicorn abort with a traceback.
        process_group=0,
    )
    try:
        upstream = f"http://127.0.0.1:{sim_port}"
        page = _wait_http(
            f"{upstream}/api/clientes/?limit=1",
            {"Authorization": f"Api-Key {api_key}"},
            time.monotonic() + 60,
        )
        document = page["results"][0]["cedula"] if page.get("results") else "12345678"
        username, password = "demo", secrets.token_urlsafe(12)
        overrides = {
            "UPSTREAM_NET_KEY": api_key,
            "UPSTREAM_NET_HOST": upstream,
            "JWT_SECRET_KEY": secrets.token_urlsafe(48),
            "API_USERNAME": username,
            "API_PASSWORD_HASH": hash_password(password),
            # The terminal shows the instructions, not a line per request.
            "LOG_LEVEL": "WARNING",
        }
        settings = _load_settings_or_exit(**overrides)
        _configure_logging(settings.LOG_LEVEL, settings.LOG_FORMAT)
        base = f"http://{ns.host}:{port}"
        token_cmd = (
            f"TOKEN=$(curl -s -X POST {base}/api/v1/auth/token "
            f"-d 'username={username}&password={password}' "
            "| python3 -c 'import sys,json; print(json.load(sys.stdin)[\"access_token\"])')"
        )
        print(
            "\n".join(
                [
                    "",
                    "isp-gateway demo (simulated WispHub backend, generated secrets)",
                    f"  API explorer  {base}/docs   (Authorize: {username} / {password})",
                    f"  ReDoc         {base}/redoc",
                    f"  Health        {base}/health",
                    f"  Simulator     {upstream}  ({ns.clients} generated clients)",
                    "",
                    f"  username: {username}",
                    f"  password: {password}",
                    "",
                    "Try it:",
                    f"  {token_cmd}",
                    f'  curl -s -H "Authorization: Bearer $TOKEN" '
                    f"{base}/api/v1/clients/by-document/{document}",
                    "",
                    "Ctrl-C stops both.",
                    "",
                ]
            ),
            flush=True,
        )
        serving.run(settings, ns.host, port, overrides=overrides)
    finally:
        sim.send_signal(signal.SIGINT)
        try:
            sim.wait(timeout=10)
        except subprocess.TimeoutExpired:
            sim.kill()
    return 0


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
