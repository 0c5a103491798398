"""Test helpers shared by every test package: run any ASGI app on a real loopback port."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from starlette.types import ASGIApp


@contextmanager
def run_server(app: ASGIApp, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve ``app`` with uvicorn in a background thread; yield its base URL.

    Binds port 0 so parallel servers never collide, waits for start-up (lifespan included),
    and on exit asks the server to stop and waits for the thread.
    """
    config = uvicorn.Config(
        app,
        host=host,
        port=0,
        lifespan="on",
        log_level="warning",
        # A test that leaves a request hanging must not block the shutdown for long.
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="test-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the test server stopped during start-up")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the test server did not start within 30 s")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    netloc = f"[{host}]" if ":" in host else host
    try:
        yield f"http://{netloc}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
