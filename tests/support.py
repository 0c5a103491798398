"""Test helpers shared by every test package: run any ASGI app on a real loopback port, run
`isp-gateway serve` (or any server) as a real process, a throwaway Redis, and the store a
test runs on (memory or Redis)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import pytest
import redis
import redis.asyncio as aioredis
import uvicorn
from starlette.types import ASGIApp

from isp_gateway.store import MemoryStore, Store
from isp_gateway.store.redis import RedisStore


class _Server(uvicorn.Server):
    """uvicorn's server, looking for the stop request every 10 ms instead of every 100 ms:
    the suite stops two or more servers per test, hundreds in all."""

    async def main_loop(self) -> None:
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            await asyncio.sleep(0.01)


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
    server = _Server(config)
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


def data_file_of(path: Path, dataset: Any) -> Path:
    """`dataset` written at `path` as a simulator's data file (JSON, UTF-8)."""
    path.write_text(json.dumps(dataset, ensure_ascii=False), "utf-8")
    return path


def wait_for(url: str, deadline: float = 30.0, **kw: Any) -> httpx.Response:
    """The first answer of `url` (any status) within `deadline` seconds."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            return httpx.get(url, timeout=2, **kw)
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError(f"{url} never answered")


def serve_args(port: int, *flags: str) -> list[str]:
    return [sys.executable, "-m", "isp_gateway", "serve", "--port", str(port), *flags]


@dataclass
class Serving:
    url: str
    proc: subprocess.Popen[str]
    output: str = ""  # all it wrote, once stopped


@contextmanager
def serving(env: dict[str, str], cwd: Path, *flags: str) -> Iterator[Serving]:
    """`isp-gateway serve *flags` on a free port as a real process (in `cwd`, where no stray
    .env lies, with `env`), its stdout and stderr in one pipe: yields once /health answers,
    then stops it with SIGINT, as Ctrl-C does, and keeps all it wrote in `output`."""
    port = free_port()
    proc = subprocess.Popen(
        serve_args(port, *flags),
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    served = Serving(f"http://127.0.0.1:{port}", proc)
    try:
        wait_for(f"{served.url}/health", deadline=60)
        yield served
    finally:
        proc.send_signal(signal.SIGINT)
        served.output, _ = proc.communicate(timeout=30)


@contextmanager
def serving_workers(
    env: dict[str, str], cwd: Path, ready: str, stderr: IO[bytes] | None = None
) -> Iterator[str]:
    """`isp-gateway serve --workers 2` on a free port as a real process (in `cwd` with `env`,
    its stderr to `stderr`, else to the test's): yields its URL once `ready` answers 200,
    then terminates it."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = serve_args(port, "--workers", "2")
    with server_process(args, env, cwd, stderr=stderr) as proc:
        wait_ready(url, proc, ready)
        yield url


@contextmanager
def server_process(
    args: list[str],
    env: dict[str, str],
    cwd: Path,
    stdout: IO[bytes] | None = None,
    stderr: IO[bytes] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """A server process as a supervisor runs it (`args`, e.g. a systemd unit's ExecStart),
    terminated at exit unless the test stopped it. Not waited for, so that a test can
    start several before it waits for each (`wait_ready`)."""
    proc = subprocess.Popen(args, env=env, cwd=cwd, stdout=stdout, stderr=stderr)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(timeout=30)


def wait_ready(
    url: str, proc: subprocess.Popen[bytes], ready: str, deadline: float = 90, **kw: Any
) -> None:
    """Until `url + ready` answers 200 (`kw`: httpx's, e.g. `verify`); fails if `proc`
    exits first or `deadline` passes."""
    end = time.monotonic() + deadline
    while True:
        assert proc.poll() is None, f"the server of {url} exited ({proc.returncode})"
        try:
            if httpx.get(f"{url}{ready}", timeout=5, **kw).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < end, f"{url}{ready} did not answer 200 within {deadline} s"
        time.sleep(0.1)


class RedisServer:
    """A throwaway `redis-server` on a free loopback port, without persistence, that a
    test can stop and start again on the same port (to see the service ride out an outage)."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError("redis-server")
        # --save '' and --appendonly no: nothing is written to disk; each start is empty.
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        args += ["--save", "", "--appendonly", "no", "--daemonize", "no"]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                err = self.process.stderr.read().decode() if self.process.stderr else ""
                raise RuntimeError(f"redis-server exited at start: {err.strip()[-300:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        if self.process is not None and self.process.stderr is not None:
            self.process.stderr.close()
        self.process = None


# Ports for servers started later by number (a subprocess, a Redis restarted on the same port)
# come from below the kernel's ephemeral range (32768 and up on Linux), where port 0 binds and
# every outgoing connection takes its local port: a port chosen there could be taken by a
# client connection between the choice and the server's bind. Each xdist worker draws from its
# own block, so two workers of a run never pick the same port.
_PORT_LOW, _PORT_HIGH = 10_000, 32_000
_handed_out: set[int] = set()


def free_port() -> int:
    """A loopback port free now, from this worker's block, never handed out twice."""
    workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1))
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) % workers if worker.isdigit() else 0
    size = (_PORT_HIGH - _PORT_LOW) // workers
    low = _PORT_LOW + index * size
    for _ in range(200):
        port = random.randrange(low, low + size)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free loopback port in {low}-{low + size}")


def redis_db_url(base: str, db: int) -> str:
    """`base` (a Redis URL, any database) pointed at database `db`, its query kept."""
    parts = urlsplit(base)
    return urlunsplit((parts.scheme, parts.netloc, f"/{db}", parts.query, ""))


@contextmanager
def emptied_redis(url: str, *patterns: str) -> Iterator[redis.Redis]:
    """A client of the Redis database at `url`, its keys matching `patterns` deleted before
    and after; without patterns, the whole database (one of the test module's own). No skip:
    a missing Redis fails the test, since what it checks depends on Redis."""
    client = redis.Redis.from_url(url)

    def empty() -> None:
        if not patterns:
            client.flushdb()
        for pattern in patterns:
            for key in client.scan_iter(match=pattern, count=1000):
                client.delete(key)

    empty()
    try:
        yield client
    finally:
        empty()
        client.close()


async def delete_keys(url: str, pattern: str) -> None:
    """Delete the keys matching `pattern` in the Redis database at `url` (never FLUSHDB:
    other suites may share the database)."""
    client = aioredis.Redis.from_url(url)
    try:
        async for key in client.scan_iter(match=pattern):
            await client.delete(key)
    finally:
        await client.aclose()


@asynccontextmanager
async def memory_or_redis(
    request: pytest.FixtureRequest, db: int, keys: str | None = None
) -> AsyncIterator[Store]:
    """The store of a fixture parametrized with ["memory", "redis"]: a MemoryStore, or a
    RedisStore on database `db` of this run's Redis (`redis_url`), answering a ping, with the
    keys matching `keys` (when given) deleted before and after."""
    if request.param == "memory":
        memory = MemoryStore()
        try:
            yield memory
        finally:
            await memory.close()
        return
    url = request.getfixturevalue("redis_url")(db)
    if keys is not None:
        await delete_keys(url, keys)
    redis_store = RedisStore(url)
    try:
        await redis_store.ping()
        yield redis_store
    finally:
        await redis_store.close()
        if keys is not None:
            await delete_keys(url, keys)
