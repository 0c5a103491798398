"""Fixtures for issue 24 (CALLERS.md 6): the crafted client data of tests/clients, and the
real `isp-gateway serve --workers 2` on a Redis of the test's own, for the rules whose point
is that the workers share them (the per-caller counters, the audit)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from isp_gateway.auth.keys import generate_key, new_entry, write_key_entries
from tests.clients.conftest import data_file, start_pair
from tests.conftest import PASSWORD, USERNAME, StartSimulator, serve_env
from tests.support import emptied_redis, serving_workers

# The crafted data and the in-process pair of tests/clients, for the rules that need no
# second worker.
__all__ = ["data_file", "start_pair"]


@dataclass
class Served:
    """`serve --workers 2` as a caller sees it: its URL, the JWT user's token, the API keys
    it was started with (by name) and the file its stderr went to."""

    url: str
    token: str
    log: Path
    keys: dict[str, str] = field(default_factory=dict)

    def headers(self, key: str | None = None, user: str | None = None) -> dict[str, str]:
        # A fresh connection per request: either worker may answer it.
        out = {"Connection": "close"}
        out.update(
            {"X-API-Key": self.keys[key]} if key else {"Authorization": f"Bearer {self.token}"}
        )
        if user is not None:
            out["X-End-User-Id"] = user
        return out

    def get(
        self, path: str, *, key: str | None = None, user: str | None = None, **kw: Any
    ) -> httpx.Response:
        return httpx.get(self.url + path, headers=self.headers(key, user), timeout=15, **kw)

    def post(
        self, path: str, *, key: str | None = None, user: str | None = None, **kw: Any
    ) -> httpx.Response:
        return httpx.post(self.url + path, headers=self.headers(key, user), timeout=15, **kw)

    def put(
        self, path: str, *, key: str | None = None, user: str | None = None, **kw: Any
    ) -> httpx.Response:
        return httpx.put(self.url + path, headers=self.headers(key, user), timeout=15, **kw)


ServeWorkers = Callable[..., Served]


def events(served: Served, **params: Any) -> list[dict[str, Any]]:
    """`GET /api/v1/audit` with `params` (up to 500 events, newest first)."""
    response = served.get("/api/v1/audit", params={"limit": 500, **params})
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()["data"]
    return found


def counted(served: Served, want: int, deadline: float = 10, **params: Any) -> list[dict[str, Any]]:
    """The counted events matching `params`, once their counts add up to `want` (each
    worker flushes its counts every second)."""
    end = time.monotonic() + deadline
    while True:
        found = events(served, **params)
        total = sum(e["details"].get("count", 0) for e in found)
        if total >= want or time.monotonic() > end:
            assert total == want, (total, want, found)
            return found
        time.sleep(0.2)


@pytest.fixture
def serve_workers(
    start_simulator: StartSimulator,
    data_file: Path,
    password_hash: str,
    tmp_path: Path,
    redis_url: Callable[[int], str],
    request: pytest.FixtureRequest,
) -> Iterator[ServeWorkers]:
    """Factory: `serve --workers 2` on the crafted data and the module's Redis database
    (`REDIS_DB` of the test module, emptied before and after), with `keys` ({name: [scopes]}
    or {name: ([scopes], rate_per_minute)}) in its key file and `settings` in its
    environment."""
    db: int = request.module.REDIS_DB
    with emptied_redis(redis_url(db)), contextlib.ExitStack() as stack:

        def start(keys: dict[str, Any] | None = None, **settings: Any) -> Served:
            sim = start_simulator(data_file=data_file)
            made: dict[str, str] = {}
            entries = []
            for name, spec in (keys or {}).items():
                scopes, rate = spec if isinstance(spec, tuple) else (spec, None)
                made[name] = generate_key()
                entries.append(new_entry(made[name], name, scopes, rate))
            keys_file = tmp_path / "keys.json"
            write_key_entries(keys_file, entries)
            env = serve_env(
                sim.url,
                password_hash,
                REDIS_URL=redis_url(db),
                API_KEYS_FILE=str(keys_file),
                **{name: str(value) for name, value in settings.items()},
            )
            log = tmp_path / "serve.log"
            handle = stack.enter_context(log.open("wb"))
            url = stack.enter_context(serving_workers(env, tmp_path, "/ready", stderr=handle))
            token = httpx.post(
                url + "/api/v1/auth/token", data={"username": USERNAME, "password": PASSWORD}
            ).json()["access_token"]
            return Served(url, token, log, made)

        yield start
