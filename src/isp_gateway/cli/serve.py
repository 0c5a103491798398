"""`serve` and `check-config`: the settings, the API key file, Redis and the metrics port
checked before serving."""

from __future__ import annotations

import argparse
import errno
import socket
import sys
from typing import Any

from isp_gateway.cli.common import EXIT_CONFIG, configure_logging, load_settings_or_exit


def _check_redis_or_exit(settings: Any) -> None:
    """Reach Redis before the server starts: a failure inside the lifespan would end start-up
    with the server's traceback instead of one line naming the setting."""
    import asyncio

    from isp_gateway.store.factory import redis_store

    async def ping() -> None:
        store = redis_store(settings)
        try:
            await asyncio.wait_for(store.ping(), 10)
        finally:
            await store.close()

    async def writable() -> bool:
        """Whether REDIS_URL's Redis takes a write: a replica answers the ping and refuses
        every write, and the service started on it answered nearly every request 503."""
        import redis.asyncio as aioredis
        from redis.exceptions import ReadOnlyError

        client = aioredis.Redis.from_url(settings.REDIS_URL.get_secret_value())
        try:
            await asyncio.wait_for(client.set("ready:probe", 1, ex=60), 10)
        except ReadOnlyError:
            return False
        finally:
            await client.aclose()
        return True

    try:
        asyncio.run(ping())
        if settings.REDIS_URL is not None and not asyncio.run(writable()):
            print(
                "isp-gateway: the Redis of REDIS_URL is a read-only replica (it refuses "
                "writes); name its master, or use REDIS_SENTINELS to follow failovers",
                file=sys.stderr,
            )
            raise SystemExit(1)
    except SystemExit:
        raise
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


def _cannot_listen(host: str, port: int) -> OSError | None:
    """Why nothing could listen on host:port now, or None. Bound as the servers bind it
    (SO_REUSEADDR: a closed connection's TIME_WAIT is no listener) but without SO_REUSEPORT:
    a listener there, even one that set SO_REUSEPORT itself (granian does), refuses the bind."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        return exc
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            return exc
    return None


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _check_port_or_exit(host: str, port: int) -> None:
    """Issue 28: granian binds with SO_REUSEPORT, so a second `serve` on a port in use
    started silently and the kernel split the connections between the two (with another
    JWT_SECRET_KEY, half the requests answered 401). uvicorn would fail, but only after its
    lifespan, with a traceback. Checked here, before anything starts, for both."""
    problem = _cannot_listen(host, port)
    if problem is None:
        return
    reason = problem.strerror or str(problem)
    if problem.errno == errno.EADDRINUSE:
        reason = "already in use (another isp-gateway, or another service, listens there)"
        advice = "stop it or choose another --port"
    elif problem.errno == errno.EACCES:
        advice = "a port below 1024 needs privileges the service does not have; choose another"
    else:
        # A host that is no address of this machine (a typo, another host's address, one
        # not up yet): "stop it or choose another --port" pointed at the wrong setting.
        advice = "--host (else ISP_GATEWAY_HOST) must be an address of this host"
    print(
        f"isp-gateway: cannot listen on {_address(host, port)}: {reason}; {advice}", file=sys.stderr
    )
    raise SystemExit(1)


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
    # The command line wins; else the settings (a systemd unit's environment file).
    host = settings.ISP_GATEWAY_HOST if ns.host is None else ns.host
    port = settings.ISP_GATEWAY_PORT if ns.port is None else ns.port
    _check_port_or_exit(host, port)
    if settings.uses_redis:
        _check_redis_or_exit(settings)
    if settings.METRICS_ENABLED and settings.METRICS_PORT is not None:
        _check_metrics_port_or_exit(settings.METRICS_HOST, settings.METRICS_PORT, port)
    # Each worker builds its own app from the environment; with several workers, a Redis
    # (REDIS_URL or REDIS_SENTINELS) makes locks, caches and throttles shared.
    metrics_workers.prepare_metrics_dir(settings, ns.workers)  # before any worker starts
    serving.log_worker_warning(settings, ns.workers)
    serving.run(settings, host, port, workers=ns.workers, proxy_headers=ns.proxy_headers)
    return 0


def app_from_env() -> Any:
    """uvicorn factory for multi-worker serving: each worker reads the environment."""
    from isp_gateway.serving import WorkerApp

    return WorkerApp()()


def cmd_check_config(ns: argparse.Namespace) -> int:
    settings = load_settings_or_exit()
    probing = getattr(ns, "probe", False)
    if not probing:
        # With --probe the keys file is one of the probe's checks: every failure is named
        # together (exit 1), not the first one alone.
        _check_keys_file_or_exit(settings)
    print(f"configuration OK; upstream {settings.UPSTREAM_NET_HOST}")
    if probing:
        from isp_gateway.cli.probe import run_probe

        return run_probe(settings)
    return 0
