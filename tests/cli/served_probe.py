"""`python -m tests.cli.served_probe PORT`: the real app with the probe routes, run
by `isp_gateway.serving` under the server SERVER names, as `isp-gateway serve
--proxy-headers` runs it. The tests in test_servers.py drive it over loopback."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from fastapi import FastAPI, Request

from isp_gateway import serving
from isp_gateway.app import create_app
from isp_gateway.settings import Settings, load_settings
from isp_gateway.web.logs import configure_logging
from tests.conftest import add_probe_routes


def create_probe_app(settings: Settings) -> FastAPI:
    app = create_app(settings)
    add_probe_routes(app)
    slow_started = 0  # slow requests this process has begun to answer

    @app.get("/_probe/client")
    async def client(request: Request) -> dict[str, Any]:
        return {"host": request.client.host if request.client else None}

    @app.get("/_probe/slow")
    async def slow() -> dict[str, Any]:
        nonlocal slow_started
        slow_started += 1
        await asyncio.sleep(1.5)  # a long request (its work), in flight when the test stops
        return {"slow": True}

    @app.get("/_probe/slow/started")
    async def started() -> dict[str, Any]:
        return {"started": slow_started}

    return app


def main() -> None:
    settings = load_settings()
    configure_logging(settings.LOG_LEVEL, settings.LOG_FORMAT)
    serving.run(
        settings,
        "127.0.0.1",
        int(sys.argv[1]),
        proxy_headers=True,
        factory="tests.cli.served_probe:create_probe_app",
    )


if __name__ == "__main__":
    main()
