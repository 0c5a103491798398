"""/ready's `upstream` check on `isp-gateway serve --workers 2` with a Redis of the test's own:
after the backend refuses our key, every worker answers 503 `unauthorized`, whichever one saw
the refusal; after it accepts the key again, every worker answers 200. Each worker kept its
own last answer: one replica's /ready flipped between 503 and 200 with the worker that took
the probe, and a worker that had seen the 403 stayed 503 after the key was fixed until it
called the backend itself. Every request opens a new connection, so either worker answers."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import PASSWORD, USERNAME, Simulator, serve_env
from tests.support import serving_workers, wait_until
from tests.support.redis_servers import RedisServer

TRIES = 24
documents = (f"9{n:09d}" for n in itertools.count(1))  # in no client's record


def readiness(url: str) -> list[tuple[int, str]]:
    answers = []
    for _ in range(TRIES):
        response = httpx.get(url + "/ready", headers={"Connection": "close"}, timeout=10)
        answers.append((response.status_code, response.json()["checks"]["upstream"]))
    return answers


def lookup_miss(url: str, token: str) -> int:
    """A lookup of a document in no record: it asks the backend."""
    return httpx.get(
        f"{url}/api/v1/clients/by-document/{next(documents)}",
        headers={"Authorization": f"Bearer {token}", "Connection": "close"},
        timeout=30,
    ).status_code


@pytest.fixture
def served(
    simulator: Simulator, password_hash: str, tmp_path: Path, own_redis: RedisServer
) -> Iterator[str]:
    env = serve_env(simulator.url, password_hash, REDIS_URL=f"redis://127.0.0.1:{own_redis.port}/0")
    with (
        (tmp_path / "serve.log").open("wb") as log,
        serving_workers(env, tmp_path, "/ready", stderr=log) as url,
    ):
        yield url


def test_every_worker_reports_the_last_answer_about_our_key(
    served: str, simulator: Simulator
) -> None:
    url = served
    token = httpx.post(
        url + "/api/v1/auth/token", data={"username": USERNAME, "password": PASSWORD}
    ).json()["access_token"]
    assert set(readiness(url)) == {(200, "ok")}

    simulator.state.faults.update({"force_403": True})
    assert lookup_miss(url, token) == 502  # one worker has the backend's 403
    assert set(readiness(url)) == {(503, "unauthorized")}

    simulator.state.faults.update({"force_403": False})
    assert lookup_miss(url, token) == 404  # one worker has the backend's 200
    wait_until(
        lambda: set(readiness(url)) == {(200, "ok")},
        timeout=10,
        message="every worker ready once the key is accepted again",
    )
