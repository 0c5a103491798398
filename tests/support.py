"""Test helpers shared by every test package: wait on a condition (`wait_until`), skip a test
whose system tool is missing (`needs`), run any ASGI app on a real loopback port, run
`isp-gateway serve` (or any server) as a real process, a throwaway Redis (alone, or a master
with replicas and sentinels), and the store a test runs on (memory or Redis)."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import pickle
import random
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import fastapi.applications
import httpx
import httpx._transports.default
import pytest
import redis
import redis.asyncio as aioredis
import uvicorn
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.types import ASGIApp

from isp_gateway.store import MemoryStore, Store
from isp_gateway.store.redis import RedisStore

T = TypeVar("T")

# -- waiting on a condition -----------------------------------------------------------------

# How long `wait_until` waits by default: far beyond what any condition takes on an idle
# machine, so that a starved one still passes; a condition met returns at the next poll.
WAIT_SECONDS = 10.0
Errors = type[BaseException] | tuple[type[BaseException], ...]


def _timed_out(
    predicate: Callable[..., Any],
    timeout: float,
    message: str | Callable[[], str] | None,
    last: Any,
    error: BaseException | None,
) -> AssertionError:
    what = message() if callable(message) else message
    name = getattr(predicate, "__name__", "<lambda>")
    what = what or (f"{name}()" if name != "<lambda>" else "the condition")
    seen = f"last error {error!r}" if error is not None else f"last answer {last!r:.300}"
    return AssertionError(f"waited {timeout:g} s for {what}; {seen}")


class _Poll:
    """One wait on a condition: asks `predicate` (an error of the `ignoring` types counts as
    a false answer), keeps its last answer, and fails the test once `timeout` has passed."""

    def __init__(
        self,
        predicate: Callable[..., Any],
        timeout: float,
        message: str | Callable[[], str] | None,
        ignoring: Errors,
    ) -> None:
        self.predicate, self.timeout, self.message = predicate, timeout, message
        self.ignoring = ignoring
        self.deadline = time.monotonic() + timeout
        self.value: Any = None

    def ask(self) -> bool:
        try:
            return self.answered(self.predicate(), None)
        except self.ignoring as exc:
            return self.answered(None, exc)

    async def ask_async(self) -> bool:
        try:
            answer = self.predicate()
            return self.answered(await answer if inspect.isawaitable(answer) else answer, None)
        except self.ignoring as exc:
            return self.answered(None, exc)

    def answered(self, value: Any, error: BaseException | None) -> bool:
        self.value = value
        if value:
            return True
        if time.monotonic() >= self.deadline:
            raise _timed_out(self.predicate, self.timeout, self.message, value, error)
        return False


def wait_until(
    predicate: Callable[[], T],
    *,
    timeout: float = WAIT_SECONDS,
    interval: float = 0.02,
    message: str | Callable[[], str] | None = None,
    ignoring: Errors = (),
) -> T:
    """Ask `predicate` every `interval` seconds until it answers something true, and return
    that answer; after `timeout` seconds, fail the test naming `message` (else the
    predicate) and its last answer. Exceptions of the `ignoring` types count as a false
    answer (e.g. a server that does not accept connections yet)."""
    poll = _Poll(predicate, timeout, message, ignoring)
    while not poll.ask():
        time.sleep(interval)
    return poll.value  # type: ignore[no-any-return]


async def wait_until_async(
    predicate: Callable[[], T | Awaitable[T]],
    *,
    timeout: float = WAIT_SECONDS,
    interval: float = 0.02,
    message: str | Callable[[], str] | None = None,
    ignoring: Errors = (),
) -> T:
    """`wait_until` for a test on an event loop: the predicate may be a coroutine function,
    and the loop runs between polls."""
    poll = _Poll(predicate, timeout, message, ignoring)
    while not await poll.ask_async():
        await asyncio.sleep(interval)
    return poll.value  # type: ignore[no-any-return]


def copy_age(resource: Any) -> float | None:
    """The age of the copy a cached list (cache.py's CachedResource) holds in this process,
    from its load; None before the first."""
    stamp = resource.local_stamp
    return None if stamp is None else time.time() - stamp[0]


def wait_for_age(resource: Any, seconds: float) -> None:
    """Until the copy `resource` holds is `seconds` old: a lifetime or a freshness window
    measured from its load is over (instead of sleeping a guess past it)."""

    def old_enough() -> bool:
        age = copy_age(resource)
        return age is not None and age >= seconds

    wait_until(old_enough, timeout=seconds + 10, message=f"a copy {seconds} s old")


def wait_for_fresh_window(length: int, margin: float = 3.0) -> None:
    """Counters in fixed windows reset at the boundary: start a test well inside one (it
    waits for the clock, at most `margin` seconds, and only when the window ends sooner)."""
    wait_until(
        lambda: length - (time.time() % length) >= margin,
        timeout=margin + 1,
        message=f"a fresh {length} s window",
    )


# -- the OpenAPI document of an app, built once a process -----------------------------------

# create_app builds the app's OpenAPI document (app.py says why), about 0.3 s of the 0.35 s
# a gateway takes to start, and the suite starts over 600. FastAPI's get_openapi is a pure
# function of its arguments: the app's title, tags and the like, and its routes, down to
# each route's endpoint and the callables of its dependencies (which hold whatever a route
# could take from the settings). The test processes build it once for each distinct set of
# arguments and hand every app its own copy (the project completes it in place).


class _Same:
    """A key part equal only to the very same object (which it keeps alive)."""

    __slots__ = ("thing",)

    def __init__(self, thing: Any) -> None:
        self.thing = thing

    def __hash__(self) -> int:
        return id(self.thing)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and self.thing is other.thing


def _route_key(route: Any) -> Any:
    """What get_openapi reads of a route (a RouteContext of an APIRoute)."""
    if not route.include_in_schema:
        return ("hidden", route.path)

    def calls(dependant: Any) -> tuple[Any, ...]:
        nested = tuple(calls(sub) for sub in dependant.dependencies)
        scopes = (dependant.own_oauth_scopes, dependant.parent_oauth_scopes)
        return (_Same(dependant.call), repr(scopes), nested)

    return (
        route.path,
        route.path_format,
        tuple(sorted(route.methods or ())),
        _Same(route.endpoint),
        calls(route.dependant),
        route.name,
        route.unique_id,
        route.summary,
        route.description,
        route.response_description,
        route.deprecated,
        route.operation_id,
        repr(route.tags),
        route.status_code,
        repr(route.response_class),
        repr(route.response_model),
        repr(route.responses),
        repr(route.openapi_extra),
        _routes_key(route.callbacks or ()),
    )


def _routes_key(routes: Any) -> tuple[Any, ...]:
    # As get_openapi walks them: the routes of the routers an app includes, each with what
    # the include adds (a prefix, dependencies, tags); only API routes are documented.
    return tuple(
        _route_key(context)
        for context in iter_route_contexts(routes)
        if isinstance(context.original_route, APIRoute)
    )


def _openapi_key(kwargs: dict[str, Any]) -> Any:
    routes = _routes_key(kwargs["routes"])
    webhooks = _routes_key(kwargs.get("webhooks") or ())
    rest = sorted((k, repr(v)) for k, v in kwargs.items() if k not in ("routes", "webhooks"))
    return (routes, webhooks, tuple(rest))


def memoize_openapi() -> None:
    """Make FastAPI build an OpenAPI document once a test process for the same arguments
    (see above); every call still gets a document of its own."""
    build = fastapi.applications.get_openapi
    if getattr(build, "memoized", False):
        return
    documents: dict[Any, dict[str, Any]] = {}

    def get_openapi(**kwargs: Any) -> dict[str, Any]:
        key = _openapi_key(kwargs)
        try:
            hash(key)
        except TypeError:  # a dependency that cannot be a key: built each time
            return build(**kwargs)
        if os.environ.get("TEST_OPENAPI_VERIFY") and key in documents:
            # TEST_OPENAPI_VERIFY=1: every reuse checked against a fresh build (the suite
            # passed so, 2026-11).
            assert build(**kwargs) == documents[key], "memo mismatch"
        if key not in documents:
            documents[key] = build(**kwargs)
        # A deep copy (of our own document), five times faster than copy.deepcopy.
        return pickle.loads(pickle.dumps(documents[key]))  # noqa: S301

    get_openapi.memoized = True  # type: ignore[attr-defined]
    fastapi.applications.get_openapi = get_openapi  # type: ignore[assignment]


# -- one default TLS context a process ---------------------------------------------------

# Every httpx client builds its TLS context, loading the CA bundle (certifi's), whether or
# not it ever speaks TLS: 20 to 90 ms each, and a started gateway makes three (its upstream
# and notice clients, the test's). The test processes give every client that asks for the
# default context one shared default context (as httpx recommends an application does:
# `verify=ctx`); a client given its own (a test's CA, verify=False) still builds it.


def share_default_ssl_context() -> None:
    build = httpx._transports.default.create_ssl_context
    if getattr(build, "shared", False):
        return
    shared: dict[tuple[str | None, str | None], ssl.SSLContext] = {}

    def create_ssl_context(
        verify: Any = True, cert: Any = None, trust_env: bool = True
    ) -> ssl.SSLContext:
        if verify is not True or cert is not None or not trust_env:
            return build(verify=verify, cert=cert, trust_env=trust_env)
        # The default: certifi's bundle, else the one SSL_CERT_FILE or SSL_CERT_DIR names.
        where = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        if where not in shared:
            shared[where] = build()
        return shared[where]

    create_ssl_context.shared = True  # type: ignore[attr-defined]
    httpx._transports.default.create_ssl_context = create_ssl_context  # type: ignore[assignment]


# -- system tools -------------------------------------------------------------------------


def tool_path(tool: str) -> str | None:
    """Where a system tool is: on PATH, or in the sbin directories (which a non-root PATH
    on Debian lacks; nginx lives there)."""
    return shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")


def missing_tool(tool: str, package: str | None = None) -> str:
    """The one line a test without `tool` is skipped with: the Debian package to install."""
    return f"needs {tool} (apt-get install {package or tool}); .ci/run installs it"


def needs(tool: str, package: str | None = None) -> pytest.MarkDecorator:
    """Skip the test (a decorator, or a module's `pytestmark`) when the system tool it
    drives is missing, with one line naming the Debian package (`package`, else the tool's
    name). `.ci/run` installs them all, so CI runs every test; `-ra` lists the skips."""
    return pytest.mark.skipif(tool_path(tool) is None, reason=missing_tool(tool, package))


def tool_or_skip(tool: str, package: str | None = None) -> str:
    """The path of the system tool a helper drives, or the test is skipped with the same
    line as `needs` (for helpers a test reaches without the mark)."""
    found = tool_path(tool)
    if found is None:
        pytest.skip(missing_tool(tool, package))
    return found


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


def assert_refused(response: httpx.Response, status: int, action: str, retry_after: str) -> None:
    """`response` is a `status` refusal with this `action`, to be asked again in
    `retry_after` seconds."""
    assert response.status_code == status, response.text
    assert response.json()["action"] == action
    assert response.headers["Retry-After"] == retry_after


def error_body(action: str, message: str, **extra: Any) -> dict[str, Any]:
    """The whole error envelope a refusal answers: `action`, `message`, and `extra` fields
    (e.g. `data`) in place of the defaults."""
    return {
        "ok": False,
        "type": "error",
        "action": action,
        "data": None,
        "message": message,
        "meta": None,
        **extra,
    }


def tool_call(tool: str, /, **arguments: Any) -> dict[str, Any]:
    """The JSON-RPC body of one MCP `tools/call` of `tool`, as POST /mcp takes it."""
    params = {"name": tool, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


def client_row(
    service_id: int,
    estado: str,
    zone_id: int,
    router: dict[str, Any],
    technician: dict[str, Any],
    **fields: Any,
) -> dict[str, Any]:
    """A client as the upstream lists it, its user, name, document and phone made from its
    service id, in `zone_id` on `router`, nothing owed; `fields` add or replace."""
    return {
        "id_servicio": service_id,
        "usuario": f"cliente{service_id}@isp",
        "nombre": f"CLIENTE {service_id}",
        "cedula": str(10_000_000 + service_id),
        "telefono": f"300{service_id:07d}",
        "direccion": "B/ CENTRO",
        "estado": estado,
        "estado_facturas": "Pagadas",
        "saldo": "0.00",
        "zona": {"id": zone_id, "nombre": f"Zona {zone_id}"},
        "router": dict(router),
        "tecnico": technician,
        **fields,
    }


def write_dataset(
    path: Path,
    clients: Any,
    plans: Any,
    invoices: Any,
    payment_methods: Any,
    **sections: Any,
) -> Path:
    """A simulator's data file at `path` with these clients, plans, invoices and payment
    methods (and `sections`, e.g. tickets)."""
    document = {"clients": clients, "plans": plans, "invoices": invoices}
    return data_file_of(path, {**document, "payment_methods": payment_methods, **sections})


def data_file_of(path: Path, dataset: Any) -> Path:
    """`dataset` written at `path` as a simulator's data file (JSON, UTF-8)."""
    path.write_text(json.dumps(dataset, ensure_ascii=False), "utf-8")
    return path


def wait_for(url: str, deadline: float = 60.0, **kw: Any) -> httpx.Response:
    """The first answer of `url` (any status) within `deadline` seconds (a process that
    starts takes seconds on a machine shared with other suites; waiting costs only that)."""
    return wait_until(
        lambda: httpx.get(url, timeout=2, **kw),
        timeout=deadline,
        interval=0.05,
        message=f"{url} to answer",
        ignoring=httpx.HTTPError,
    )


def base_env(**extra: str) -> dict[str, str]:
    """A clean environment: none of the service's settings leak in from the test run."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "SYSTEMROOT")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def run_cli(
    *args: str, env: dict[str, str], cwd: Path, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`isp-gateway *args` as a real subprocess (in `cwd`, with `env`), its output kept."""
    return subprocess.run(
        [sys.executable, "-m", "isp_gateway", *args],
        env=env,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def serve_args(port: int, *flags: str) -> list[str]:
    return [sys.executable, "-m", "isp_gateway", "serve", "--port", str(port), *flags]


@dataclass
class Serving:
    url: str
    proc: subprocess.Popen[str]
    output: str = ""  # all it wrote, once stopped


def default_sigint() -> None:
    """Popen's `preexec_fn` for a child a test stops with SIGINT, as Ctrl-C does: SIGINT at
    its default there, whatever this process inherited. A shell's background job has it
    ignored, and a Python child then ignores it too (it raises KeyboardInterrupt only where
    SIGINT was at its default when it started)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


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

    def ready_now() -> bool:
        assert proc.poll() is None, f"the server of {url} exited ({proc.returncode})"
        return httpx.get(f"{url}{ready}", timeout=5, **kw).status_code == 200

    wait_until(
        ready_now,
        timeout=deadline,
        interval=0.05,
        message=f"{url}{ready} to answer 200",
        ignoring=httpx.HTTPError,
    )


def _start_answering(args: list[str], port: int, timeout: float) -> subprocess.Popen[bytes]:
    """Start a Redis process (server or sentinel) and wait until it answers PING on `port`."""
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def answers() -> bool:
        if process.poll() is not None:
            err = process.stderr.read().decode() if process.stderr else ""
            raise RuntimeError(f"{args[0]} exited at start: {err.strip()[-300:]}")
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")

    try:
        message = f"{args[0]} to answer on port {port}"
        wait_until(answers, timeout=timeout, message=message, ignoring=OSError)
    except BaseException:
        _stop(process)
        raise
    return process


def _stop(process: subprocess.Popen[bytes] | None) -> None:
    if process is not None and process.poll() is None:
        process.kill()
        process.wait(timeout=10)
    if process is not None and process.stderr is not None:
        process.stderr.close()


class RedisServer:
    """A throwaway `redis-server` on a free loopback port, without persistence, that a
    test can stop and start again on the same port (to see the service ride out an outage).
    `replica_of`: the port of its master; `directory`: where a replica keeps the copy it
    loads (the working directory otherwise)."""

    def __init__(
        self,
        port: int | None = None,
        *,
        replica_of: int | None = None,
        directory: Path | None = None,
    ) -> None:
        self.port = port or free_port()
        self.replica_of = replica_of
        self.directory = directory
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
        # A replica's first copy starts at once (Redis waits 5 s for more replicas by default).
        args += ["--repl-diskless-sync-delay", "0"]
        if self.directory is not None:
            args += ["--dir", str(self.directory)]
        if self.replica_of is not None:
            args += ["--replicaof", "127.0.0.1", str(self.replica_of)]
        self.process = _start_answering(args, self.port, timeout)

    def stop(self) -> None:
        _stop(self.process)
        self.process = None


SENTINEL_MASTER = "mymaster"
SETTLE_PROBE = "sentinel-group:settled"


class RedisSentinel:
    """A throwaway sentinel on a free loopback port, watching the master on `master_port` as
    SENTINEL_MASTER: `redis-server <conf> --sentinel`, so the redis-server package alone is
    needed (Debian's redis-sentinel package adds only another name and a service for that
    binary). Its configuration file (which it rewrites as it learns replicas, other
    sentinels and failovers) lives in `directory`."""

    def __init__(
        self,
        directory: Path,
        master_port: int,
        *,
        quorum: int,
        down_after_ms: int,
        failover_timeout_ms: int,
    ) -> None:
        self.port = free_port()
        self.config = directory / f"sentinel-{self.port}.conf"
        self.config.write_text(
            f"port {self.port}\nbind 127.0.0.1\ndaemonize no\ndir {directory}\n"
            f"logfile {directory / f'sentinel-{self.port}.log'}\n"
            f"sentinel monitor {SENTINEL_MASTER} 127.0.0.1 {master_port} {quorum}\n"
            f"sentinel down-after-milliseconds {SENTINEL_MASTER} {down_after_ms}\n"
            f"sentinel failover-timeout {SENTINEL_MASTER} {failover_timeout_ms}\n"
            f"sentinel parallel-syncs {SENTINEL_MASTER} 1\n"
        )
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 20) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise FileNotFoundError("redis-server")
        args = [binary, str(self.config), "--sentinel"]
        self.process = _start_answering(args, self.port, timeout)

    def stop(self) -> None:
        _stop(self.process)
        self.process = None


class SentinelGroup:
    """A master, its replicas and the sentinels that watch them, all throwaway processes on
    loopback ports with their files in `directory`. `start` returns once every replica has
    copied the master and every sentinel knows the replicas and the other sentinels (so a
    failover can be agreed on)."""

    def __init__(
        self,
        directory: Path,
        *,
        replicas: int = 1,
        sentinels: int = 3,
        quorum: int = 2,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 2000,
    ) -> None:
        self.master = RedisServer(directory=directory)
        self.replicas = [
            RedisServer(replica_of=self.master.port, directory=directory) for _ in range(replicas)
        ]
        self.sentinels = [
            RedisSentinel(
                directory,
                self.master.port,
                quorum=quorum,
                down_after_ms=down_after_ms,
                failover_timeout_ms=failover_timeout_ms,
            )
            for _ in range(sentinels)
        ]

    @property
    def addresses(self) -> str:
        """The sentinels as REDIS_SENTINELS takes them."""
        return ",".join(f"127.0.0.1:{sentinel.port}" for sentinel in self.sentinels)

    def start(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        try:
            for server in [self.master, *self.replicas]:
                server.start()
            for sentinel in self.sentinels:
                sentinel.start()
            self._wait(deadline, self._settled, "the replicas and sentinels to settle")
        except BaseException:
            self.stop()
            raise

    def _settled(self) -> bool:
        # A replica's link is up before the master streams writes to it (up to a second
        # later, after a full copy): a write must have reached every replica.
        with redis.Redis(port=self.master.port, socket_timeout=1) as client:
            client.set(SETTLE_PROBE, "1")
        for replica in self.replicas:
            with redis.Redis(port=replica.port, socket_timeout=1) as client:
                if client.get(SETTLE_PROBE) is None:
                    return False
        for sentinel in self.sentinels:
            with redis.Redis(port=sentinel.port, socket_timeout=1) as client:
                state = client.sentinel_master(SENTINEL_MASTER)
            if state["num-slaves"] < len(self.replicas):
                return False
            if state["num-other-sentinels"] < len(self.sentinels) - 1:
                return False
        return True

    def master_port(self) -> int | None:
        """The master's port as the first sentinel that answers names it."""
        for sentinel in self.sentinels:
            if sentinel.process is None:
                continue
            try:
                with redis.Redis(port=sentinel.port, socket_timeout=1) as client:
                    address = client.sentinel_get_master_addr_by_name(SENTINEL_MASTER)
            except redis.RedisError:
                continue
            if address:
                return int(address[1])
        return None

    def wait_for_new_master(self, old_port: int, timeout: float) -> int:
        """The port of the replica the sentinels promoted in place of `old_port`."""
        deadline = time.monotonic() + timeout
        self._wait(deadline, lambda: self.master_port() not in (None, old_port), "a failover")
        port = self.master_port()
        assert port is not None
        return port

    @staticmethod
    def _wait(deadline: float, done: Callable[[], bool], what: str) -> None:
        timeout = max(0.0, deadline - time.monotonic())
        wait_until(done, timeout=timeout, message=what, ignoring=redis.RedisError)

    def stop(self) -> None:
        for process in [*self.sentinels, *self.replicas, self.master]:
            process.stop()


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


# This test process's own mark in the keys its tests write to a shared Redis database.
RUN = uuid.uuid4().hex[:12]


def memory_or_redis_store(db: int, keys: str) -> Any:
    """A module's `store` fixture (`store = memory_or_redis_store(REDIS_DB, "ispgw:x:*")`):
    its tests run on a MemoryStore, then on a RedisStore (`memory_or_redis`)."""

    @pytest.fixture(params=["memory", "redis"])
    async def store(request: pytest.FixtureRequest) -> AsyncIterator[Store]:
        async with memory_or_redis(request, db, keys) as opened:
            yield opened

    return store


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
    async with redis_store_on(RedisStore(url), url, keys) as redis_store:
        yield redis_store


@asynccontextmanager
async def redis_store_on(
    redis_store: RedisStore, url: str, keys: str | None = None
) -> AsyncIterator[RedisStore]:
    """`redis_store` (of the Redis database at `url`, which it may reach another way, e.g.
    through Sentinel) once it answers a ping, closed at exit; the keys matching `keys`
    (when given) deleted before and after."""
    if keys is not None:
        await delete_keys(url, keys)
    try:
        await redis_store.ping()
        yield redis_store
    finally:
        await redis_store.close()
        if keys is not None:
            await delete_keys(url, keys)
