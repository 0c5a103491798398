"""`serve` and `check-config`: the settings, the API key file, Redis and the metrics port
checked before serving."""

from __future__ import annotations

import argparse
import socket
import sys
from typing import Any

from isp_gateway.cli.common import EXIT_CONFIG, configure_logging, load_settings_or_exit


def _check_redis_or_exit(settings: Any) -> None:
    """Reach Redis before the server starts: a failure inside the lifespan would end start-up
    with the server's traceback instead of one line naming the setting."""
    import asyncio

    from isp_gateway.services import redis_store

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


def _check_keys_file_or_exit(settings: Any) -> None:
    """A key file the service cannot read (its mode, its owner, broken JSON) is refused
    before serving, naming the setting and the file (CALLERS.md 6): served, it would hold
    no keys and every bot would be refused. One that does not exist yet holds no keys."""
    from isp_gateway.auth.keys import KeyFileError, check_key_file

    if settings.API_KEYS_FILE is None:
        return
    try:
        check_key_file(settings.API_KEYS_FILE)
    except KeyFileError as exc:  # its message starts with the path
        print(f"isp-gateway: API_KEYS_FILE {exc}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None


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

    settings = load_settings_or_exit()
    configure_logging(settings.LOG_LEVEL, settings.LOG_FORMAT)
    _check_keys_file_or_exit(settings)
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
    settings = load_settings_or_exit()
    _check_keys_file_or_exit(settings)
    print(f"configuration OK; upstream {settings.UPSTREAM_NET_HOST}")
    return 0
