"""API keys on `isp-gateway serve --workers 2` with a real Redis (CALLERS.md 3 and 4): a key
made by the real CLI works on every worker within 5 s and stops within 5 s of its
revocation; a broken key file keeps the last good keys; a key's rate and the audit are
shared by the workers. Every request opens a new connection, so either worker may answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Simulator, serve_env
from tests.support import (
    base_env,
    run_cli,
    serving_workers,
    wait_for_fresh_window,
    wait_until,
)

REDIS_DB = 7
PLANS = "/api/v1/internet-plans/"
# Fresh connections per check: with two workers on one socket, both answer some of them.
TRIES = 24


def keys_cli(tmp_path: Path, *args: str) -> str:
    env = base_env(API_KEYS_FILE=str(tmp_path / "keys.json"))
    result = run_cli("keys", *args, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def get(url: str, path: str, key: str, **params: str | int) -> httpx.Response:
    return httpx.get(
        url + path,
        params=params,
        headers={"X-API-Key": key, "Connection": "close"},
        timeout=10,
    )


def statuses(url: str, key: str, path: str = PLANS) -> set[int]:
    return {get(url, path, key).status_code for _ in range(TRIES)}


@pytest.fixture
def served(
    simulator: Simulator, password_hash: str, tmp_path: Path, shared_redis: str
) -> Iterator[str]:
    """The URL of `serve --workers 2`; its log (stderr) goes to tmp_path / "serve.log"."""
    env = serve_env(
        simulator.url,
        password_hash,
        REDIS_URL=shared_redis,
        API_KEYS_FILE=str(tmp_path / "keys.json"),
    )
    with (
        (tmp_path / "serve.log").open("wb") as log,
        serving_workers(env, tmp_path, "/ready", stderr=log) as url,
    ):
        yield url


def test_a_key_from_the_cli_on_two_workers(served: str, tmp_path: Path) -> None:
    url = served
    # No key file yet: nothing is a key.
    assert statuses(url, "igw_" + "A" * 43) == {401}
    key = keys_cli(tmp_path, "create", "portal", "--scopes", "plans:read,audit:read")
    wait_until(lambda: statuses(url, key) == {200}, timeout=5, message="the key on both workers")
    assert statuses(url, key) == {200}
    # Its scopes only, on every worker; each refusal is audited in the shared store.
    refused = {get(url, "/api/v1/payment-methods", key).status_code for _ in range(TRIES)}
    assert refused == {403}

    # Counted (CALLERS.md 6): one event per caller and minute for both workers, its count
    # the sum of theirs once each has flushed (every second).
    def counted() -> list[dict[str, Any]] | None:
        events = get(url, "/api/v1/audit", key, event="scope_denied", limit=500).json()["data"]
        done = sum(e["details"]["count"] for e in events) == TRIES
        return events if done else None

    events = wait_until(counted, timeout=10, message="both workers' refusals counted") or []
    assert sum(e["details"]["count"] for e in events) == TRIES
    assert len(events) <= 2  # a minute may turn between the refusals
    assert {e["caller"] for e in events} == {"portal"}
    # A broken file keeps the last good keys.
    path = tmp_path / "keys.json"
    good = path.read_text()
    path.write_text('{"keys": [')
    kept = "keeping the 1 keys read before"
    log = tmp_path / "serve.log"
    # Until both workers have looked at the broken file (a lookup a second after the last).
    wait_until(lambda: statuses(url, key) and log.read_text().count(kept) >= 2, timeout=5)
    assert statuses(url, key) == {200}
    # Each worker that looked at the broken file says so once: both did.
    logged = log.read_text()
    assert logged.count(kept) == 2, logged
    assert key not in logged
    path.write_text(good)
    # Revoked with the real CLI: refused everywhere within 5 s, as a bad JWT.
    keys_cli(tmp_path, "revoke", "portal")
    wait_until(lambda: statuses(url, key) == {401}, timeout=5, message="the revocation")
    assert statuses(url, key) == {401}
    answer = get(url, PLANS, key)
    assert answer.json() == {"detail": "Could not validate credentials."}
    assert answer.headers["www-authenticate"] == "Bearer"
    assert key not in json.dumps(events)


def test_a_keys_rate_is_shared_by_the_workers(served: str, tmp_path: Path) -> None:
    url = served
    key = keys_cli(tmp_path, "create", "flow", "--scopes", "plans:read", "--rate-per-minute", "5")
    # A key made after it, asked instead of it (whose requests count): once both workers
    # have the probe's file, they have the flow key too.
    probe = keys_cli(tmp_path, "create", "probe", "--scopes", "plans:read")
    wait_until(lambda: statuses(url, probe) == {200}, timeout=5, message="the keys on both workers")
    wait_for_fresh_window(60, margin=10)
    answers = [get(url, PLANS, key) for _ in range(12)]
    assert [a.status_code for a in answers] == [200] * 5 + [429] * 7
    assert all(a.json()["action"] == "rate_limited" for a in answers[5:])
    assert all(1 <= int(a.headers["Retry-After"]) <= 60 for a in answers[5:])
