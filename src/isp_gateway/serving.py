"""Run the gateway under the server SERVER names: granian (the default) or uvicorn.

Workers are processes and each builds its own app: the server calls `WorkerApp` (a
picklable description of the app, never the app itself) in every worker, which loads the
settings, sets up logging and calls `create_app`. Nothing is built in the parent.
"""

from __future__ import annotations

import importlib
import logging
import math
import sys
from dataclasses import dataclass, field, replace
from typing import Any

from isp_gateway.settings import ConfigurationError, Settings, load_settings
from isp_gateway.web.logs import configure_logging
from isp_gateway.web.params import MAX_WAIT_SECONDS

# Granian's own lines (start-up, workers) go through our root handler and format.
_GRANIAN_LOGS: dict[str, Any] = {
    "handlers": {},
    "loggers": {
        "_granian": {"handlers": [], "propagate": True},
        "granian.access": {"handlers": [], "propagate": True},
    },
}


# Beyond the longest request, for its answer to be written and the lifespan to close.
STOP_MARGIN_SECONDS = 5.0


def graceful_stop_seconds(upstream_timeout_seconds: float) -> int:
    """How long a stopping worker may take before it is killed (granian) or its requests
    are cancelled (uvicorn): longer than the longest request, a long poll's wait
    (MAX_WAIT_SECONDS) then one upstream call (UPSTREAM_TIMEOUT_SECONDS), so nothing is cut.

    A stop takes far less: long polls answer at once and ticket creations that have not
    sent their POST are refused (stopping.py), so what runs on is at most one upstream call.
    The window is for requests that do not watch for the stop (bounded by the upstream
    timeout), and for a worker still starting up, which granian would otherwise wait for
    forever: its stop signal is lost."""
    longest = MAX_WAIT_SECONDS + upstream_timeout_seconds
    return math.ceil(longest + STOP_MARGIN_SECONDS)


@dataclass(frozen=True)
class WorkerApp:
    """Builds the app in a worker process. `overrides` are settings beyond the environment
    (the demo's generated secrets); they travel to the worker in the process pipe."""

    overrides: dict[str, Any] = field(default_factory=dict)
    # The app factory, `module:function` taking the settings (a test adds probe routes).
    factory: str = "isp_gateway.app:create_app"
    # Trust X-Forwarded-For / -Proto from these addresses (uvicorn's FORWARDED_ALLOW_IPS).
    proxy_headers: bool = False
    forwarded_allow_ips: str = "127.0.0.1"

    def __call__(self) -> Any:
        module, _, name = self.factory.partition(":")
        create_app = getattr(importlib.import_module(module), name)
        try:
            settings = load_settings(**self.overrides)
        except ConfigurationError as exc:
            print(f"isp-gateway: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
        configure_logging(settings.LOG_LEVEL, settings.LOG_FORMAT)
        app: Any = create_app(settings)
        if self.proxy_headers:
            from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

            app = ProxyHeadersMiddleware(app, trusted_hosts=self.forwarded_allow_ips)
        return app


def run(
    settings: Settings,
    host: str,
    port: int,
    *,
    workers: int = 1,
    proxy_headers: bool = False,
    overrides: dict[str, Any] | None = None,
    factory: str = WorkerApp.factory,
) -> None:
    """Serve until SIGINT/SIGTERM; the lifespan starts and stops in every worker."""
    worker_app = WorkerApp(
        overrides=overrides or {},
        factory=factory,
        proxy_headers=proxy_headers,
        forwarded_allow_ips=settings.FORWARDED_ALLOW_IPS,
    )
    if settings.SERVER == "uvicorn":
        _run_uvicorn(settings, host, port, workers, worker_app)
    else:
        _run_granian(settings, host, port, workers, worker_app)


def _run_granian(
    settings: Settings, host: str, port: int, workers: int, worker_app: WorkerApp
) -> None:
    from granian import Granian
    from granian.constants import Interfaces
    from granian.log import LogLevels

    server = Granian(
        "isp_gateway.cli:app_from_env",  # names the processes; the app comes from worker_app
        address=host,
        port=port,
        interface=Interfaces.ASGI,  # with the lifespan
        workers=workers,
        log_level=LogLevels(settings.LOG_LEVEL.lower()),
        log_dictconfig=_GRANIAN_LOGS,
        log_access=False,  # ours masks documents and phones, and is batched
        # Like uvicorn's supervisor with several workers: a worker that dies is replaced.
        # One process exits instead, so a broken start-up is seen, not retried forever.
        respawn_failed_workers=workers > 1,
        workers_kill_timeout=graceful_stop_seconds(settings.UPSTREAM_TIMEOUT_SECONDS),
    )
    # Granian's dictConfig replaced the handlers; put ours back for the parent's lines.
    configure_logging(settings.LOG_LEVEL, settings.LOG_FORMAT)
    server.serve(target_loader=worker_app, wrap_loader=False)


def _run_uvicorn(
    settings: Settings, host: str, port: int, workers: int, worker_app: WorkerApp
) -> None:
    import uvicorn

    common: dict[str, Any] = {
        "host": host,
        "port": port,
        "proxy_headers": worker_app.proxy_headers,
        "forwarded_allow_ips": worker_app.forwarded_allow_ips,
        "log_level": settings.LOG_LEVEL.lower(),
        "log_config": None,  # uvicorn's lines go through our root handler and format
        "access_log": False,
        # Then the requests still running are cancelled (their locks released on the way).
        "timeout_graceful_shutdown": graceful_stop_seconds(settings.UPSTREAM_TIMEOUT_SECONDS),
    }
    if workers > 1:
        # uvicorn's workers need an import string; each reads the environment.
        uvicorn.run("isp_gateway.cli:app_from_env", factory=True, workers=workers, **common)
    else:
        # uvicorn applies the proxy headers itself (`common`); not twice.
        uvicorn.run(replace(worker_app, proxy_headers=False)(), **common)


def log_worker_warning(settings: Settings, workers: int) -> None:
    if workers > 1 and not settings.uses_redis:
        logging.getLogger("isp_gateway").warning(
            "several workers without REDIS_URL or REDIS_SENTINELS: zone caps, idempotency "
            "and throttles are per worker"
        )
