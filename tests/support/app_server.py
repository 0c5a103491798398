"""Any ASGI app served by uvicorn on a real loopback port, in a thread of the test process."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from starlette.types import ASGIApp

from tests.support.waiting import wait_until


class _Server(uvicorn.Server):
    """uvicorn's server, looking for the stop request every 10 ms instead of every 100 ms,
    and stopping as soon as its connections and tasks are done instead of after a fixed
    0.1 s and then in steps of 0.1 s: the suite stops two or more servers per test, well
    over a thousand in all."""

    async def main_loop(self) -> None:
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            await asyncio.sleep(0.01)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # uvicorn's own, but waiting on the condition (every 10 ms) where it sleeps.
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        try:
            await asyncio.wait_for(self._drained(), self.config.timeout_graceful_shutdown)
        except TimeoutError:
            for task in self.server_state.tasks:
                task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
        if not self.force_exit:
            await self.lifespan.shutdown()

    async def _drained(self) -> None:
        """Until every connection has answered and closed and every task has ended."""
        state = self.server_state
        while (state.connections or state.tasks) and not self.force_exit:
            await asyncio.sleep(0.01)
        for server in self.servers:
            await server.wait_closed()


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
        # uvicorn closes an idle connection after 5 s, the period of the ticket sweep: a
        # client reusing it just then got a RemoteProtocolError (the gateway answered 502;
        # seen in tests/tickets/test_zone_sweep.py under load). The test servers keep
        # idle connections longer than any test's pause.
        timeout_keep_alive=75,
    )
    server = _Server(config)
    thread = threading.Thread(target=server.run, name="test-uvicorn", daemon=True)
    thread.start()

    def started() -> bool:
        if not thread.is_alive():
            raise RuntimeError("the test server stopped during start-up")
        return server.started

    try:
        wait_until(started, timeout=30, interval=0.01, message="the test server to start")
    except AssertionError:
        server.should_exit = True
        raise
    port = server.servers[0].sockets[0].getsockname()[1]
    netloc = f"[{host}]" if ":" in host else host
    try:
        yield f"http://{netloc}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
