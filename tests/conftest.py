"""Shared fixtures: a real simulator and a real gateway, each under uvicorn on loopback (and
one with throwaway probe routes), the Redis of the run, and the environment of a real
`isp-gateway serve`."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import bcrypt
import httpx
import pytest
from fastapi import APIRouter, Depends, FastAPI
from pydantic import BaseModel, Field

from isp_gateway.app import create_app
from isp_gateway.auth.dependencies import CurrentCaller, current_caller
from isp_gateway.auth.passwords import hash_password
from isp_gateway.auth.tokens import issue_token
from isp_gateway.kit.errors import Locked, NotFound, UpstreamRateLimited
from isp_gateway.settings import Settings, load_settings
from isp_gateway.simulator import SimulatorConfig, create_simulator_app
from tests.support import (
    RedisServer,
    SentinelGroup,
    emptied_redis,
    memoize_openapi,
    redis_db_url,
    run_server,
    share_default_ssl_context,
)

API_KEY = "test-upstream-key-0123456789"
USERNAME = "bot"
PASSWORD = "correct horse battery staple"
JWT_SECRET = "test-secret-key-that-is-long-enough-0123456789"
T = TypeVar("T")


def pytest_configure() -> None:
    # What every started gateway would otherwise build again (tests/support/build_once.py
    # says why).
    memoize_openapi()
    share_default_ssl_context()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def password_hash() -> str:
    """The API user's hash for every gateway of the suite: bcrypt's cheapest cost (4), so a
    login costs milliseconds, not the shipped cost's 0.3 to 1 s of CPU (the suite's logins,
    schemathesis' among them, took about a tenth of its CPU). What the cost changes (a login's
    time, an unknown user's equal time) is tried at the shipped cost with `shipped_hash`."""
    return bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()


@pytest.fixture(scope="session")
def shipped_hash() -> str:
    """The API user's hash as `isp-gateway hash-password` makes it (cost 12)."""
    return hash_password(PASSWORD)


@dataclass
class Simulator:
    url: str
    app: Any

    @property
    def state(self) -> Any:
        return self.app.state.sim


@dataclass
class Gateway:
    url: str
    settings: Settings
    app: Any
    client: httpx.Client
    token: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    @property
    def runtime(self) -> Any:
        return self.app.state.runtime

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.client.get(path, headers={**self.auth, **kw.pop("headers", {})}, **kw)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return self.client.post(path, headers={**self.auth, **kw.pop("headers", {})}, **kw)

    def put(self, path: str, **kw: Any) -> httpx.Response:
        return self.client.put(path, headers={**self.auth, **kw.pop("headers", {})}, **kw)


StartSimulator = Callable[..., Simulator]
StartGateway = Callable[..., Gateway]


def _start_simulator(stack: contextlib.ExitStack, **overrides: Any) -> Simulator:
    overrides.setdefault("api_key", API_KEY)
    overrides.setdefault("clients", 200)
    overrides.setdefault("ping_duration", 0.3)
    app = create_simulator_app(SimulatorConfig(**overrides))
    url = stack.enter_context(run_server(app))
    return Simulator(url=url, app=app)


@pytest.fixture
def start_simulator() -> Iterator[StartSimulator]:
    """Factory: start a simulator with SimulatorConfig overrides (api_key preset)."""
    with contextlib.ExitStack() as stack:
        yield lambda **overrides: _start_simulator(stack, **overrides)


@pytest.fixture
def simulator(start_simulator: StartSimulator) -> Simulator:
    return start_simulator()


@pytest.fixture
def sim(start_simulator: StartSimulator, request: pytest.FixtureRequest) -> Simulator:
    """A simulator on the data file of the test's `data_file` fixture (its package's)."""
    return start_simulator(data_file=request.getfixturevalue("data_file"))


def gateway_settings(upstream_url: str, password_hash: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "UPSTREAM_NET_KEY": API_KEY,
        "UPSTREAM_NET_HOST": upstream_url,
        "JWT_SECRET_KEY": JWT_SECRET,
        "API_USERNAME": USERNAME,
        "API_PASSWORD_HASH": password_hash,
        # Tests make many calls; the real budget is exercised by its own tests.
        "UPSTREAM_RATE_PER_MINUTE": 100_000,
        "UPSTREAM_RATE_PER_HOUR": 1_000_000,
        "UPSTREAM_TIMEOUT_SECONDS": 3.0,
    }
    values.update(overrides)
    return load_settings(**values)


def _start_gateway(
    stack: contextlib.ExitStack,
    password_hash: str,
    upstream_url: str,
    *,
    prepare: Callable[[Any], None] | None = None,
    **overrides: Any,
) -> Gateway:
    settings = gateway_settings(upstream_url, password_hash, **overrides)
    app = create_app(settings)
    if prepare is not None:
        prepare(app)  # e.g. extra routes a test needs, before the app runs
    url = stack.enter_context(run_server(app))
    client = stack.enter_context(httpx.Client(base_url=url, timeout=30))
    return Gateway(
        url=url,
        settings=settings,
        app=app,
        client=client,
        token=issue_token(settings, USERNAME),
    )


@pytest.fixture
def start_gateway(password_hash: str) -> Iterator[StartGateway]:
    """Factory: run the real app (with its lifespan) against an upstream URL."""
    with contextlib.ExitStack() as stack:

        def start(
            upstream_url: str, *, prepare: Callable[[Any], None] | None = None, **overrides: Any
        ) -> Gateway:
            return _start_gateway(stack, password_hash, upstream_url, prepare=prepare, **overrides)

        yield start


@pytest.fixture
def gateway(simulator: Simulator, start_gateway: StartGateway) -> Gateway:
    return start_gateway(simulator.url)


Pair = tuple[Simulator, Gateway]
StartPair = Callable[..., Pair]


def pair_starter(data: str, ready: Callable[[Gateway], None], doc: str) -> Any:
    """A fixture (`start_pair = pair_starter("data_file", warm, "...")` in a conftest) that
    starts a simulator on the data file the fixture named `data` gives, and a gateway on it,
    made `ready` (e.g. its lists loaded), the simulator's call counts reset: `start(
    sim_overrides, **gateway_settings)` returns both."""

    @pytest.fixture
    def starter(
        start_simulator: StartSimulator,
        start_gateway: StartGateway,
        request: pytest.FixtureRequest,
    ) -> StartPair:
        data_file = request.getfixturevalue(data)

        def start(sim_overrides: dict[str, Any] | None = None, **gw_overrides: Any) -> Pair:
            sim = start_simulator(**{"data_file": data_file, **(sim_overrides or {})})
            gw = start_gateway(sim.url, **gw_overrides)
            ready(gw)
            sim.state.reset_stats()
            return sim, gw

        return start

    starter.__doc__ = doc
    return starter


@pytest.fixture(scope="module")
def module_pair(password_hash: str) -> Iterator[tuple[Simulator, Gateway]]:
    """A default simulator and gateway shared by the tests of one module, for modules whose
    tests only read or are refused (starting and stopping the pair costs about a second a
    test). A module uses it by overriding `simulator` and `gateway` with module scope."""
    with contextlib.ExitStack() as stack:
        sim = _start_simulator(stack)
        yield sim, _start_gateway(stack, password_hash, sim.url)


def module_pair_fixtures() -> tuple[Any, Any]:
    """`simulator, gateway = module_pair_fixtures()` in a module: its `simulator` and
    `gateway` fixtures become the module's shared pair (module_pair)."""

    @pytest.fixture(scope="module", name="simulator")
    def simulator(module_pair: tuple[Simulator, Gateway]) -> Simulator:
        return module_pair[0]

    @pytest.fixture(scope="module", name="gateway")
    def gateway(module_pair: tuple[Simulator, Gateway]) -> Gateway:
        return module_pair[1]

    return simulator, gateway


# -- probe routes: throwaway routes on the real app ---------------------------------------


class ProbeRequest(BaseModel):
    pings: int = Field(ge=1, le=20)
    name: str


def add_probe_routes(app: FastAPI) -> None:
    """Throwaway routes on a real app (the Starlette way of testing handlers): a protected
    echo of the token subject, a body to validate, and crashes of every kind."""
    router = APIRouter(prefix="/api/v1/_probe", dependencies=[Depends(current_caller)])

    @router.get("/whoami")
    async def whoami(caller: CurrentCaller) -> dict[str, Any]:
        return {"sub": caller.caller.removeprefix("jwt:")}

    @router.post("/body")
    async def body(payload: ProbeRequest) -> dict[str, Any]:
        return payload.model_dump()

    @router.get("/crash")
    async def crash() -> None:
        raise RuntimeError("boom")

    @router.get("/not-found")
    async def not_found() -> None:
        raise NotFound("Client not found", action="client_not_found")

    @router.get("/locked")
    async def locked() -> None:
        raise Locked(action="client_verification_locked", retry_after=7)

    @router.get("/upstream-429")
    async def upstream_429() -> None:
        raise UpstreamRateLimited(12.4)

    app.include_router(router)


@pytest.fixture
def start_probe_gateway(start_gateway: StartGateway) -> StartGateway:
    """Like `start_gateway`, with the probe routes added to the real app before it runs."""

    def start(upstream_url: str = "http://127.0.0.1:9", **overrides: Any) -> Gateway:
        return start_gateway(upstream_url, prepare=add_probe_routes, **overrides)

    return start


@pytest.fixture(scope="module")
def probe_gateway(password_hash: str) -> Iterator[Gateway]:
    """One probe gateway with default settings shared by a module's read-only tests."""
    with contextlib.ExitStack() as stack:
        yield _start_gateway(stack, password_hash, "http://127.0.0.1:9", prepare=add_probe_routes)


# -- Redis: the tests bring their own ---------------------------------------------------

REDIS_MISSING = (
    "the Redis tests need redis-server on PATH (apt-get install redis-server) "
    "or REDIS_URL set to a Redis they may use"
)


def start_redis_server() -> RedisServer:
    """A throwaway redis-server of the caller's own, or the test fails with one line."""
    return started(RedisServer(), REDIS_MISSING)


def started(process: T, missing: str) -> T:
    """`process` started (a RedisServer, a SentinelGroup), or the test fails with the one
    line `missing` when its binary is."""
    try:
        process.start()  # type: ignore[attr-defined]
    except FileNotFoundError:
        pytest.fail(missing, pytrace=False)
    return process


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A redis-server of the test's own (to freeze, stop or lock with a password), stopped at
    the end."""
    yield from stopped_after(start_redis_server())


def stopped_after(process: T) -> Iterator[T]:
    """A fixture's body for a process of the test's own (anything with `stop()`)."""
    try:
        yield process
    finally:
        process.stop()  # type: ignore[attr-defined]


SENTINEL_MISSING = (
    "the Redis Sentinel tests need redis-server on PATH (apt-get install redis-server); "
    "they start its sentinels as `redis-server <conf> --sentinel`"
)


def start_sentinel_group(directory: Path, **options: Any) -> SentinelGroup:
    """A master, replicas and sentinels of the caller's own (SentinelGroup's options), or the
    test fails with one line naming the package."""
    return started(SentinelGroup(directory, **options), SENTINEL_MISSING)


@pytest.fixture
def sentinel_group(tmp_path: Path) -> Iterator[SentinelGroup]:
    """A master, a replica and three sentinels (quorum 2) of the test's own, their files in
    `tmp_path / "redis"`, stopped at the end."""
    directory = tmp_path / "redis"
    directory.mkdir()
    yield from stopped_after(start_sentinel_group(directory, replicas=1, sentinels=3, quorum=2))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under xdist each worker starts its own redis-server (the session fixture below runs
    once per worker process). A REDIS_URL is one Redis for all workers, and a module's tests
    share their database: they then stay on one worker (`--dist loadgroup`, as `make test`
    runs), so two workers never use one database at once."""
    if not os.environ.get("REDIS_URL", "").strip():
        return
    for item in items:
        if "redis_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group(f"redis:{item.module.__name__}"))


@pytest.fixture(scope="session")
def redis_base_url() -> Iterator[str]:
    """The Redis of this test run: REDIS_URL when set, else a throwaway redis-server on a free
    loopback port (no persistence) stopped at the end, so parallel runs and other users of
    the machine's Redis never share databases. With neither, the test fails with one line."""
    configured = os.environ.get("REDIS_URL", "").strip()
    if configured:
        yield configured
        return
    server = start_redis_server()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_url(redis_base_url: str) -> Callable[[int], str]:
    """Factory: `redis_url(13)` is the URL of database 13 of this run's Redis. Tests keep
    their own database numbers and key prefixes, and delete only their own keys."""

    def url(db: int) -> str:
        return redis_db_url(redis_base_url, db)

    return url


@pytest.fixture
def shared_redis(redis_url: Callable[[int], str], request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of the test module's own database (its `REDIS_DB`) of this run's Redis, which
    the test's workers share, emptied before and after. No skip: what such a test checks
    depends on Redis."""
    url = redis_url(request.module.REDIS_DB)
    with emptied_redis(url):
        yield url


# -- `isp-gateway serve` as a real process --------------------------------------------------


def required_env(password_hash: str) -> dict[str, str]:
    """The five required settings, valid, as environment variables."""
    return {
        "UPSTREAM_NET_KEY": API_KEY,
        "UPSTREAM_NET_HOST": "http://127.0.0.1:9",
        "JWT_SECRET_KEY": JWT_SECRET,
        "API_USERNAME": USERNAME,
        "API_PASSWORD_HASH": password_hash,
    }


def serve_env(upstream_url: str, password_hash: str, **extra: str) -> dict[str, str]:
    """The environment of a real `isp-gateway serve` against `upstream_url`: this process's
    own without its REDIS_URL and PROMETHEUS_MULTIPROC_DIR (a test names its own in
    `extra`), the required settings, a budget the tests never spend, warnings only."""
    env = {**os.environ}
    env.pop("REDIS_URL", None)
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    return {
        **env,
        "UPSTREAM_NET_KEY": API_KEY,
        "UPSTREAM_NET_HOST": upstream_url,
        "JWT_SECRET_KEY": JWT_SECRET,
        "API_USERNAME": USERNAME,
        "API_PASSWORD_HASH": password_hash,
        "UPSTREAM_RATE_PER_MINUTE": "100000",
        "UPSTREAM_RATE_PER_HOUR": "1000000",
        "LOG_LEVEL": "WARNING",
        **extra,
    }
